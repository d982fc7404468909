import type { Pool, PoolConnection } from 'mysql2/promise';
import { LIMITS } from '@asynccmd/core';
import {
  runningPerKey,
  type KeyedCandidate,
  type KeyedClaimReader,
  type KeyedRead,
  type KeyPriorityHead,
} from '@asynccmd/core/store-kit';
import { inTransaction, select, write, type Queryable } from './connection.js';
import { firstOfKey, NOT_HELD_BACK } from './sql.js';

/*
 * The key of each command of a keyed type (key limits, fair share, rate limits per key) in a column
 * of its own, `flow_key`, written by the statement that writes the row: the value of the payload
 * field `<table>_key_fields` names for the type, as text (at most LIMITS.rateKeyChars characters);
 * '' when the payload has no such field, or null or '' there; NULL for a type without a key field.
 * idx_flow holds (type, key, priority, flow_rank, next_run_at, id), flow_rank being 0 for a
 * PENDING command with a key and 1 otherwise: a (key, priority)'s PENDING commands are the start of
 * its range, in claim order, so a keyed claim reads a bounded number of rows per key (core
 * keyed-reads.ts). MySQL has no partial index: every command has an entry; one without a key
 * keeps its (type, NULL, priority, 1, …) through its status changes. The keys are found by a loose
 * scan of plain columns (MariaDB will not loose-scan an index through a generated one).
 */

/** The key of the row being written, of type `type` (an expression; the payload is the row's column). */
const keyOfRow = (t: string, type: string): string =>
  `LEFT(COALESCE(NULLIF(JSON_UNQUOTE(JSON_EXTRACT(payload,
     (SELECT key_path FROM \`${t}_key_fields\` WHERE keyed_type = ${type}))), 'null'), ''), ${LIMITS.rateKeyChars})`;

/**
 * The flow key of a row an INSERT … VALUES writes, its type bound twice (the two `?`): the payload
 * is read as the column set earlier in the row (MySQL's VALUES reads an earlier column so), and the
 * subqueries read only bound values. NULL for a type without a key field.
 */
export const insertedFlowKey = (t: string): string =>
  `IF(EXISTS (SELECT 1 FROM \`${t}_key_fields\` WHERE keyed_type = ?), ${keyOfRow(t, '?')}, NULL)`;

/**
 * The flow key of a row of a batch INSERT … VALUES, from its type's key path bound twice (null: a
 * type without a key field), read before the statement: a look-up per row would cost each row
 * a subquery.
 */
export const FLOW_KEY_OF_BOUND_PATH = `IF(? IS NULL, NULL, LEFT(COALESCE(NULLIF(JSON_UNQUOTE(JSON_EXTRACT(payload, ?)),
     'null'), ''), ${LIMITS.rateKeyChars}))`;

/** The flow key of a row an UPDATE writes (its payload as set by an earlier assignment). */
export const updatedFlowKey = (t: string): string =>
  `IF(EXISTS (SELECT 1 FROM \`${t}_key_fields\` WHERE keyed_type = type), ${keyOfRow(t, 'type')}, NULL)`;

/**
 * Migration 18: the key fields, the key columns and their index, and the keys of what is stored.
 * Each statement commits on its own: a re-run leaves out the ALTER when its index is there
 * (`altered`), and runs the rest again (each idempotent), so the keys are written even when the
 * first run stopped after the ALTER.
 */
export function flowKeysDdl(t: string, collation: string, altered: boolean): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS \`${t}_key_fields\` (
         keyed_type VARCHAR(128) NOT NULL,
         key_path   VARCHAR(70)  NOT NULL,
         PRIMARY KEY (keyed_type)
       ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ${collation}`,
    `INSERT INTO \`${t}_key_fields\` (keyed_type, key_path)
       SELECT type, CONCAT('$.', key_field) FROM \`${t}_key_rate_limits\`
       UNION ALL SELECT type, CONCAT('$.', key_field) FROM \`${t}_key_limits\`
       ON DUPLICATE KEY UPDATE key_path = key_path`,
    // One ALTER: all or nothing, and its index tells a re-run that it ran.
    ...(altered
      ? []
      : [
          `ALTER TABLE \`${t}\`
       ADD COLUMN flow_key VARCHAR(${LIMITS.rateKeyChars}) CHARACTER SET utf8mb4 COLLATE ${collation} NULL,
       ADD COLUMN flow_rank TINYINT GENERATED ALWAYS AS (
         CASE WHEN status = 'PENDING' AND flow_key IS NOT NULL THEN 0 ELSE 1 END
       ) STORED,
       ADD KEY idx_flow (type, flow_key, priority, flow_rank, next_run_at, id)`,
        ]),
    `UPDATE \`${t}\` SET flow_key = ${updatedFlowKey(t)}
       WHERE status IN ('WAITING', 'PENDING', 'RUNNING') AND type IN (SELECT keyed_type FROM \`${t}_key_fields\`)`,
  ];
}

/** The statements of the flow keys: a declaration's, and a keyed claim's reads. */
export function flowKeySql(t: string) {
  const table = `\`${t}\``;
  const ms = (time: string): string => `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ${time}) DIV 1000`;
  /**
   * Of one (key, priority), the first due claimable commands. Bound: type, key, priority, now, how
   * many. Its ORDER BY names the table's columns: a bare `id` would be the text alias.
   */
  const rowsOf = `(SELECT CAST(id AS CHAR) AS id, flow_key AS \`key\`, priority, ${ms('next_run_at')} AS nextRunAtMs
       FROM ${table} FORCE INDEX (idx_flow)
       WHERE type = ? AND flow_key = ? AND priority = ? AND flow_rank = 0 AND next_run_at <= ?
         AND ${NOT_HELD_BACK} AND ${firstOfKey(table, table)}
       ORDER BY ${table}.next_run_at, ${table}.id LIMIT ?)`;
  return {
    /** Bound: type, path, then the next pair. */
    declare: (n: number) => `INSERT INTO \`${t}_key_fields\` (keyed_type, key_path)
      VALUES ${Array.from({ length: n }, () => '(?, ?)').join(', ')}
      ON DUPLICATE KEY UPDATE key_path = VALUES(key_path)`,
    /** Bound: type. The keys of its unfinished commands in `status` from its key field now. */
    rekey: (
      status: 'PENDING' | 'RUNNING',
    ) => `UPDATE ${table} FORCE INDEX (${status === 'PENDING' ? 'idx_claim_type' : 'idx_due'})
      SET flow_key = ${updatedFlowKey(t)}
      WHERE status = '${status}' AND type = ? AND NOT (flow_key <=> ${updatedFlowKey(t)})`,
    /**
     * Each (key, priority) of the type's commands — a loose scan of idx_flow, one entry per group
     * (the type a range, bound twice: on equality MariaDB reads the type's entries one by one) —
     * with the due time and id of its first PENDING command ('<ms> <id>'), one entry more (NULL:
     * none). Then bound: the type.
     */
    heads: `SELECT g.k AS \`key\`, g.p AS priority,
        (SELECT IF(h.flow_rank = 0, CONCAT(${ms('h.next_run_at')}, ' ', h.id), NULL)
         FROM ${table} AS h FORCE INDEX (idx_flow)
         WHERE h.type = ? AND h.flow_key = g.k AND h.priority = g.p
         ORDER BY h.flow_rank, h.next_run_at, h.id LIMIT 1) AS head
      FROM (SELECT flow_key AS k, priority AS p FROM ${table} FORCE INDEX (idx_flow)
            WHERE type BETWEEN ? AND ? AND flow_key IS NOT NULL GROUP BY type, flow_key, priority) AS g`,
    /**
     * For each head (a JSON array of the ids `heads` gave), the first due claimable command of its
     * (type, key, priority) now ('<id> <ms>'; NULL: none) — the head itself unless another claim
     * took it. One statement for a claim's reads of one row per key: the key reached from the head's
     * row, so no key is compared with a bound string (whose collation would not be the column's).
     * Bound: now, then the heads.
     */
    firstAfterHeads: `SELECT CAST(r.hid AS CHAR) AS head,
        (SELECT CONCAT(h.id, ' ', ${ms('h.next_run_at')}) FROM ${table} AS h FORCE INDEX (idx_flow)
         WHERE h.type = head.type AND h.flow_key = head.flow_key AND h.priority = head.priority
           AND h.flow_rank = 0 AND h.next_run_at <= ? AND ${NOT_HELD_BACK} AND ${firstOfKey(table, 'h')}
         ORDER BY h.next_run_at, h.id LIMIT 1) AS first
      FROM JSON_TABLE(?, '$[*]' COLUMNS (hid BIGINT PATH '$')) AS r
      JOIN ${table} AS head ON head.id = r.hid`,
    /** The type's RUNNING commands per key. Bound: type. */
    running: `SELECT flow_key AS \`key\`, COUNT(*) AS n FROM ${table} FORCE INDEX (idx_due)
      WHERE status = 'RUNNING' AND type = ? AND flow_key <> '' GROUP BY flow_key`,
    /** `reads` (key, priority) ranges, each its own LIMIT. */
    rows: (reads: number) => Array.from({ length: reads }, () => rowsOf).join('\nUNION ALL\n'),
  };
}

export type FlowKeySql = ReturnType<typeof flowKeySql>;

/**
 * Declares the key fields of `limits` with `writeLimits` (the limits' own upsert) in one READ
 * COMMITTED transaction, then gives each type's unfinished commands their keys from the field now.
 */
export function declareKeyed(
  pool: Pool,
  flow: FlowKeySql,
  limits: readonly { readonly type: string; readonly keyField: string }[],
  writeLimits: (conn: PoolConnection) => Promise<unknown>,
): Promise<void> {
  return inTransaction(pool, true, async (conn) => {
    await writeLimits(conn);
    await write(
      conn,
      flow.declare(limits.length),
      limits.flatMap((l) => [l.type, `$.${l.keyField}`]),
    );
    for (const l of limits) {
      await write(conn, flow.rekey('PENDING'), [l.type]);
      await write(conn, flow.rekey('RUNNING'), [l.type]);
    }
  });
}

/**
 * A keyed claim's reads of `type` on `conn` (inside its transaction); `now` the claim's (UTC
 * text). Reads of one row per key — the usual ones when many keys wait (core leveledReads) — go
 * in one statement from the heads' ids (`firstAfterHeads`); MariaDB runs each range of a UNION as
 * a query of its own (about 0.1 ms each: 500 keys cost 50–70 ms, against 15–20 ms from the heads).
 */
export function mysqlKeyedReader(
  conn: Queryable,
  sql: FlowKeySql,
  type: string,
  now: string,
): KeyedClaimReader {
  /** The head id of each (key, priority) the last `heads` gave, by pairOf. */
  const headIds = new Map<string, string>();
  const pairOf = (key: string, priority: number): string => `${priority} ${key}`;
  /** The reads of one row whose head is known, in one statement; the rest as ranges of their own. */
  const firstRows = async (reads: readonly KeyedRead[]): Promise<KeyedCandidate[]> => {
    const byHead = new Map<string, KeyedRead>();
    for (const r of reads) byHead.set(headIds.get(pairOf(r.key, r.priority))!, r);
    const rows = await select<{ head: string; first: string | null }>(conn, sql.firstAfterHeads, [
      now,
      JSON.stringify([...byHead.keys()].map(Number)),
    ]);
    return rows.flatMap((row): KeyedCandidate[] => {
      const read = byHead.get(row.head);
      if (read === undefined || row.first === null) return [];
      const [id, ms] = row.first.split(' ');
      return [{ id: id!, key: read.key, priority: read.priority, nextRunAtMs: Number(ms) }];
    });
  };
  const ranges = async (reads: readonly KeyedRead[]): Promise<KeyedCandidate[]> =>
    (
      await select<{ id: string; key: string; priority: number | string; nextRunAtMs: number | string }>(
        conn,
        sql.rows(reads.length),
        reads.flatMap((r) => [type, r.key, r.priority, now, r.rows]),
      )
    ).map((r): KeyedCandidate => ({
      id: r.id,
      key: r.key,
      priority: Number(r.priority),
      nextRunAtMs: Number(r.nextRunAtMs),
    }));
  return {
    heads: async (countRunning) => {
      headIds.clear();
      const heads = (
        await select<{ key: string; priority: number | string; head: string | null }>(conn, sql.heads, [
          type,
          type,
          type,
        ])
      ).flatMap((h): KeyPriorityHead[] => {
        if (h.head === null) return [];
        const [ms, id] = h.head.split(' ');
        headIds.set(pairOf(h.key, Number(h.priority)), id!);
        return [{ key: h.key, priority: Number(h.priority), nextRunAtMs: Number(ms), id: id! }];
      });
      const running = countRunning
        ? runningPerKey(await select<{ key: string; n: number | string }>(conn, sql.running, [type]))
        : new Map<string, number>();
      return { heads, running };
    },
    rows: async (reads) => {
      const one = reads.filter((r) => r.rows === 1 && headIds.has(pairOf(r.key, r.priority)));
      const more = reads.filter((r) => !(r.rows === 1 && headIds.has(pairOf(r.key, r.priority))));
      return [
        ...(one.length === 0 ? [] : await firstRows(one)),
        ...(more.length === 0 ? [] : await ranges(more)),
      ];
    },
  };
}
