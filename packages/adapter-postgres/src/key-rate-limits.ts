import {
  asKeyRateCandidates,
  keyedCandidates,
  keyRateTake,
  type KeyRateClaimStatements,
  type KeyRateLimitStatements,
} from '@asynccmd/core/store-kit';
import type { PostgresConnection, PostgresStatements } from './connection.js';
import { postgresKeyedReader, type FlowKeySql } from './flow-keys.js';
import { declareKeyed } from './key-limits.js';
import type { TableNames } from './names.js';

const limitsTable = (n: TableNames): string => `${n.schema}."${n.tableName}_key_rate_limits"`;
const bucketsTable = (n: TableNames): string => `${n.schema}."${n.tableName}_key_rate_buckets"`;

/** Migration 17: one row per type with a rate limit per key, and one bucket per key in use. */
export function keyRateLimitsDdl(n: TableNames): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${limitsTable(n)} (
         type       TEXT    PRIMARY KEY,
         key_field  TEXT    NOT NULL,
         max_starts INTEGER NOT NULL,
         period_ms  INTEGER NOT NULL,
         burst      INTEGER NOT NULL
       )`,
    // refilled_at_ms: epoch milliseconds with a fraction, on the database clock.
    `CREATE TABLE IF NOT EXISTS ${bucketsTable(n)} (
         type           TEXT             NOT NULL,
         bucket_key     TEXT             NOT NULL,
         tokens         DOUBLE PRECISION NOT NULL,
         refilled_at_ms DOUBLE PRECISION NOT NULL,
         PRIMARY KEY (type, bucket_key)
       )`,
  ];
}

/** The statements of the per-key rate limits (migration 17); `set` and `returning` are the claim's. */
export function keyRateLimitSql(n: TableNames, set: string, returning: string) {
  const t = n.table;
  const limits = limitsTable(n);
  const buckets = bucketsTable(n);
  return {
    lock: `SELECT key_field AS "keyField", max_starts AS "maxStarts", period_ms AS "periodMs", burst
      FROM ${limits} WHERE type = $1 FOR UPDATE`,
    /** A statement of its own after the lock: the clock once the lock is held. */
    now: `SELECT extract(epoch FROM clock_timestamp()) * 1000 AS "nowMs"`,
    buckets: `SELECT bucket_key AS key, tokens, refilled_at_ms AS "refilledAtMs"
      FROM ${buckets} WHERE type = $1 AND bucket_key = ANY($2::text[])`,
    /** $1 ids, then the claim's $2 token, $3 lease ms, $4 instance. */
    claim: `UPDATE ${t} AS c SET ${set}
      FROM unnest($1::bigint[]) AS picked(id) WHERE c.id = picked.id AND c.status = 'PENDING'
      ${returning}`,
    save: `INSERT INTO ${buckets} (type, bucket_key, tokens, refilled_at_ms)
      SELECT $1, * FROM unnest($2::text[], $3::float8[], $4::float8[])
      ON CONFLICT (type, bucket_key) DO UPDATE SET tokens = EXCLUDED.tokens, refilled_at_ms = EXCLUDED.refilled_at_ms`,
    /** $1 type, $2 now ms, $3 max starts, $4 burst, $5 period ms: the buckets full again. */
    prune: `DELETE FROM ${buckets} WHERE type = $1
      AND tokens + ($2::float8 - refilled_at_ms) * ($3::float8 - $4::float8) / $5::float8 >= $4::float8`,
    declare: `INSERT INTO ${limits} (type, key_field, max_starts, period_ms, burst)
      SELECT * FROM unnest($1::text[], $2::text[], $3::integer[], $4::integer[], $5::integer[])
      ON CONFLICT (type) DO UPDATE SET key_field = EXCLUDED.key_field, max_starts = EXCLUDED.max_starts,
        period_ms = EXCLUDED.period_ms, burst = EXCLUDED.burst`,
    list: `SELECT type, key_field AS "keyField", max_starts AS "maxStarts", period_ms AS "periodMs", burst
      FROM ${limits} ORDER BY type`,
  };
}

type KeyRateLimitSql = ReturnType<typeof keyRateLimitSql>;

/** claimWithinKeyRate's statements, run by `query` (in the claim's transaction), for `type`. */
export function keyRateStatements<Row>(
  query: PostgresStatements['query'],
  sql: KeyRateLimitSql,
  flow: FlowKeySql,
  r: {
    type: string;
    now: string;
    nowMs: number;
    claimValues: readonly unknown[];
    claim: (text: string, values: unknown[]) => Promise<Row[]>;
  },
): KeyRateClaimStatements<Row> {
  return {
    lock: async () => {
      const [limit] = (await query<KeyRateLimitRow>(sql.lock, [r.type])).rows;
      if (limit === undefined) return null;
      const [clock] = (await query<{ nowMs: string }>(sql.now)).rows;
      return { type: r.type, ...keyRateLimit(limit), nowMs: Number(clock?.nowMs) };
    },
    candidates: async (_keyField, perKey) =>
      asKeyRateCandidates(
        await keyedCandidates(
          postgresKeyedReader({ query }, flow, r.type, r.now),
          keyRateTake(perKey, r.nowMs),
        ),
      ),
    buckets: async (keys) =>
      (
        await query<{ key: string; tokens: string; refilledAtMs: string }>(sql.buckets, [r.type, keys])
      ).rows.map((b) => ({ key: b.key, tokens: Number(b.tokens), refilledAtMs: Number(b.refilledAtMs) })),
    claim: (ids) => r.claim(sql.claim, [ids, ...r.claimValues]),
    save: async (buckets, limit) => {
      await query(sql.save, [
        r.type,
        buckets.map((b) => b.key),
        buckets.map((b) => b.tokens),
        buckets.map((b) => b.refilledAtMs),
      ]);
      await query(sql.prune, [r.type, limit.nowMs, limit.maxStarts, limit.burst, limit.periodMs]);
    },
  };
}

/** A `<table>_key_rate_limits` row as the statements read it: numbers as text. */
interface KeyRateLimitRow {
  keyField: string;
  maxStarts: string;
  periodMs: string;
  burst: string;
}

function keyRateLimit(row: KeyRateLimitRow) {
  return {
    keyField: row.keyField,
    maxStarts: Number(row.maxStarts),
    periodMs: Number(row.periodMs),
    burst: Number(row.burst),
  };
}

/** The `<table>_key_rate_limits` statements on the store's connection. */
export function postgresKeyRateLimitStatements<Tx>(
  connection: PostgresConnection<Tx>,
  sql: KeyRateLimitSql,
  flow: FlowKeySql,
): KeyRateLimitStatements {
  return {
    write: (limits) =>
      declareKeyed(connection, flow, limits, (on) =>
        on.query(sql.declare, [
          limits.map((l) => l.type),
          limits.map((l) => l.keyField),
          limits.map((l) => l.maxStarts),
          limits.map((l) => l.periodMs),
          limits.map((l) => l.burst),
        ]),
      ),
    read: async () =>
      (await connection.query<KeyRateLimitRow & { type: string }>(sql.list)).rows.map((row) => ({
        type: row.type,
        ...keyRateLimit(row),
      })),
  };
}
