import { LIMITS } from '@asynccmd/core';
import type { KeyedCandidate, KeyedClaimReader, KeyPriorityHead } from '@asynccmd/core/store-kit';
import { runningPerKey } from '@asynccmd/core/store-kit';
import type { PostgresStatements } from './connection.js';
import type { TableNames } from './names.js';
import { firstOfKey, NOT_HELD_BACK } from './sql.js';

/*
 * The key of each command of a keyed type (key limits, fair share, rate limits per key) in a column
 * of its own, `flow_key`, written by the database with the row: the value of the payload field
 * that `<table>_key_fields` names for the type, as text (at most LIMITS.rateKeyChars characters); ''
 * when the payload has no such field, or null or '' there; NULL for a type without a key field.
 * The partial index `flow_idx` holds the PENDING commands with a key by (type, key, priority, due
 * time, id), so a keyed claim reads a bounded number of rows per key (core keyed-reads.ts): never a
 * whole backlog. Commands of types without a key field are not in it.
 */

/** `<table>_key_fields`, quoted and qualified (migration 20). */
export function keyFieldsTable(n: TableNames): string {
  return `${n.schema}."${n.tableName}_key_fields"`;
}

/**
 * The flow key of a command of `type` with `payload` (SQL expressions; the payload as json): NULL
 * when its type has no key field. One primary-key probe of a table with a row per keyed type.
 */
export const flowKeyOf = (n: TableNames, type: string, payload: string): string =>
  `(SELECT left(coalesce(nullif(${payload} ->> kf.key_field, 'null'), ''), ${LIMITS.rateKeyChars})
      FROM ${keyFieldsTable(n)} AS kf WHERE kf.keyed_type = ${type})`;

/**
 * Migration 20: the key field of each keyed type, the flow_key column and its index (commands of
 * types without a key field are left out of it), and the keys of what is stored already.
 */
export function flowKeysDdl(n: TableNames): string[] {
  const t = n.table;
  const kf = keyFieldsTable(n);
  return [
    `CREATE TABLE IF NOT EXISTS ${kf} (
       keyed_type TEXT PRIMARY KEY,
       key_field  TEXT NOT NULL
     )`,
    // No default: added without rewriting the table.
    `ALTER TABLE ${t} ADD COLUMN IF NOT EXISTS flow_key TEXT`,
    `CREATE INDEX IF NOT EXISTS ${n.index('flow_idx')} ON ${t} (type, flow_key, priority, next_run_at, id)
       WHERE status = 'PENDING' AND flow_key IS NOT NULL`,
    `INSERT INTO ${kf} (keyed_type, key_field)
       SELECT type, key_field FROM ${n.schema}."${n.tableName}_key_rate_limits"
       UNION ALL SELECT type, key_field FROM ${n.schema}."${n.tableName}_key_limits"
       ON CONFLICT (keyed_type) DO NOTHING`,
    `UPDATE ${t} AS c SET flow_key = ${flowKeyOf(n, 'c.type', 'c.payload')}
       WHERE c.status IN ('WAITING', 'PENDING', 'RUNNING') AND c.type IN (SELECT keyed_type FROM ${kf})`,
  ];
}

/** The statements of the flow keys: a declaration's, and a keyed claim's reads. */
export function flowKeySql(n: TableNames) {
  const t = n.table;
  const kf = keyFieldsTable(n);
  /** The PENDING commands of type $1 with a key, as flow_idx holds them (its predicate spelled out). */
  const keyed = (alias: string): string =>
    `${alias}.type = $1::text AND ${alias}.status = 'PENDING' AND ${alias}.flow_key IS NOT NULL`;
  const ms = (time: string): string => `(extract(epoch FROM ${time}) * 1000)::float8`;
  /** The RUNNING commands of type $1 with a key, grouped by key (after `when`), for a select list. */
  const runningOfType = (when: string): string =>
    `FROM (SELECT type, flow_key FROM ${t} WHERE status = 'RUNNING' OFFSET 0) AS r
      WHERE ${when} r.type = $1::text AND r.flow_key <> '' GROUP BY r.flow_key`;
  /** Ids of the type's ($1) commands in `status` (each status from its own partial index). */
  const ofStatus = (status: string): string => `SELECT id FROM ${t} WHERE status = '${status}' AND type = $1`;
  return {
    /** $1 types, $2 key fields: each type's key field (the last declaration wins). */
    declare: `INSERT INTO ${kf} (keyed_type, key_field) SELECT * FROM unnest($1::text[], $2::text[])
      ON CONFLICT (keyed_type) DO UPDATE SET key_field = EXCLUDED.key_field`,
    /**
     * $1 type: the keys of its unfinished commands from its key field now. Catches up what was
     * written before the field was declared or changed (or by a transaction that had read no field).
     */
    rekey: `UPDATE ${t} AS c SET flow_key = ${flowKeyOf(n, 'c.type', 'c.payload')}
      FROM (${ofStatus('PENDING')} UNION ALL ${ofStatus('RUNNING')}) AS active
      WHERE c.id = active.id AND c.flow_key IS DISTINCT FROM ${flowKeyOf(n, 'c.type', 'c.payload')}`,
    /**
     * $1 type: the first PENDING command of each (key, priority) — a loose scan of flow_idx, one
     * entry per pair — and, with $2, the RUNNING commands per key (from the partial lease index).
     */
    heads: `WITH RECURSIVE pairs AS (
        (SELECT f.flow_key AS k, f.priority AS p, f.next_run_at AS due, f.id FROM ${t} AS f
         WHERE ${keyed('f')} ORDER BY f.flow_key, f.priority, f.next_run_at, f.id LIMIT 1)
        UNION ALL
        SELECT nxt.* FROM pairs CROSS JOIN LATERAL (
          SELECT f.flow_key, f.priority, f.next_run_at, f.id FROM ${t} AS f
          WHERE ${keyed('f')} AND (f.flow_key, f.priority) > (pairs.k, pairs.p)
          ORDER BY f.flow_key, f.priority, f.next_run_at, f.id LIMIT 1) AS nxt
      )
      SELECT 'head' AS kind, k AS key, p AS priority, ${ms('due')} AS "nextRunAtMs", id::text AS id FROM pairs
      UNION ALL
      SELECT 'running', r.flow_key, count(*)::integer, NULL, NULL ${runningOfType('$2::boolean AND')}`,
    /** $1 type: its RUNNING commands per key (`heads`' second part alone). */
    running: `SELECT r.flow_key AS key, count(*)::integer AS n ${runningOfType('')}`,
    /**
     * $1 type, $2 keys, $3 priorities, $4 how many, $5 now: of each (key, priority), the first due
     * claimable commands in claim order — a range of flow_idx that ends at the first not yet due.
     */
    rows: `SELECT c.id::text AS id, c.flow_key AS key, c.priority, ${ms('c.next_run_at')} AS "nextRunAtMs"
      FROM unnest($2::text[], $3::smallint[], $4::integer[]) AS r(k, p, n)
      CROSS JOIN LATERAL (
        SELECT due.id, due.flow_key, due.priority, due.next_run_at FROM ${t} AS due
        WHERE ${keyed('due')} AND due.flow_key = r.k AND due.priority = r.p
          AND due.next_run_at <= $5::timestamptz AND ${NOT_HELD_BACK} AND ${firstOfKey(t, 'due')}
        ORDER BY due.next_run_at, due.id LIMIT r.n) AS c`,
  };
}

export type FlowKeySql = ReturnType<typeof flowKeySql>;

/** The RUNNING commands per key of `type`, read on `on`. */
export async function postgresRunningPerKey(
  on: PostgresStatements,
  sql: FlowKeySql,
  type: string,
): Promise<Map<string, number>> {
  return runningPerKey((await on.query<{ key: string; n: number }>(sql.running, [type])).rows);
}

/**
 * A keyed claim's reads of `type` on `on` (a statement of its transaction, or the store's
 * connection outside one); `now` the claim's, as bound. Rows come back as text.
 */
export function postgresKeyedReader(
  on: PostgresStatements,
  sql: FlowKeySql,
  type: string,
  now: string,
): KeyedClaimReader {
  return {
    heads: async (countRunning) => {
      const rows = (
        await on.query<{
          kind: string;
          key: string;
          priority: string;
          nextRunAtMs: string | null;
          id: string | null;
        }>(sql.heads, [type, countRunning])
      ).rows;
      const heads: KeyPriorityHead[] = [];
      const running: { key: string; n: string }[] = [];
      for (const r of rows) {
        if (r.kind === 'head') {
          heads.push({
            key: r.key,
            priority: Number(r.priority),
            nextRunAtMs: Number(r.nextRunAtMs),
            id: r.id!,
          });
        } else running.push({ key: r.key, n: r.priority });
      }
      return { heads, running: runningPerKey(running) };
    },
    rows: async (reads) =>
      (
        await on.query<{ id: string; key: string; priority: string; nextRunAtMs: string }>(sql.rows, [
          type,
          reads.map((r) => r.key),
          reads.map((r) => r.priority),
          reads.map((r) => r.rows),
          now,
        ])
      ).rows.map((r): KeyedCandidate => ({
        id: r.id,
        key: r.key,
        priority: Number(r.priority),
        nextRunAtMs: Number(r.nextRunAtMs),
      })),
  };
}
