import type { RateLimitStatements } from '@asynccmd/core/store-kit';
import type { PostgresConnection, PostgresStatements } from './connection.js';
import type { TableNames } from './names.js';

/** `<table>_rate_limits`, quoted and qualified (migration 15). */
export function rateLimitsTable(n: TableNames): string {
  return `${n.schema}."${n.tableName}_rate_limits"`;
}

/** Migration 15: one token bucket per rate-limited type, refilled on the database clock. */
export function rateLimitsDdl(n: TableNames): string {
  // refilled_at keeps microseconds: each take refills from it exactly, so no time is lost or
  // counted twice between takes.
  return `CREATE TABLE IF NOT EXISTS ${rateLimitsTable(n)} (
         type        TEXT             PRIMARY KEY,
         max_starts  INTEGER          NOT NULL,
         period_ms   INTEGER          NOT NULL,
         burst       INTEGER          NOT NULL,
         tokens      DOUBLE PRECISION NOT NULL,
         refilled_at TIMESTAMPTZ(6)   NOT NULL
       )`;
}

/** The bucket `r` refilled to `at` (core refillRateBucket, in SQL): multiplied before divided. */
const level = (r: string, at: string): string =>
  `LEAST(${r}.burst::float8, ${r}.tokens + (EXTRACT(EPOCH FROM (${at} - ${r}.refilled_at)) * 1000)::float8
     * (${r}.max_starts - ${r}.burst) / ${r}.period_ms)`;

function rateLimitSql(n: TableNames) {
  const rl = rateLimitsTable(n);
  return {
    // A new type's bucket starts full; a known one is refilled to now at its old rate, then holds
    // at most the new burst.
    declare: `INSERT INTO ${rl} AS r (type, max_starts, period_ms, burst, tokens, refilled_at)
      SELECT t, m, p, b, b, clock_timestamp() FROM unnest($1::text[], $2::integer[], $3::integer[], $4::integer[]) AS d(t, m, p, b)
      ON CONFLICT (type) DO UPDATE SET
        tokens = LEAST(EXCLUDED.burst::float8, ${level('r', 'GREATEST(r.refilled_at, clock_timestamp())')}),
        refilled_at = GREATEST(r.refilled_at, clock_timestamp()),
        max_starts = EXCLUDED.max_starts, period_ms = EXCLUDED.period_ms, burst = EXCLUDED.burst`,
    list: `SELECT type, max_starts AS "maxStarts", period_ms AS "periodMs", burst,
        ${level('r', 'GREATEST(r.refilled_at, clock_timestamp())')} AS tokens
      FROM ${rl} AS r ORDER BY type`,
    /**
     * $1 type, $2 want, $3 now (NULL: the database clock). One statement: the row is locked, read
     * in its latest committed version (READ COMMITTED re-reads it after a wait), refilled to now and
     * left with what the take leaves. A clock read before a wait on another taker's lock is earlier
     * than that taker's refill: GREATEST refills nothing then, and loses no time.
     */
    take: `WITH b AS (
        SELECT type, max_starts, period_ms, burst, tokens, refilled_at,
               GREATEST(refilled_at, COALESCE($3::timestamptz, clock_timestamp())) AS at
        FROM ${rl} WHERE type = $1 FOR UPDATE
      ), l AS (
        SELECT b.*, ${level('b', 'b.at')} AS level FROM b
      ), g AS (
        SELECT l.*, LEAST($2::integer, floor(l.level)::integer) AS granted FROM l
      )
      UPDATE ${rl} AS r SET tokens = g.level - g.granted, refilled_at = g.at
      FROM g WHERE r.type = g.type
      RETURNING g.granted, g.level - g.granted AS tokens, (EXTRACT(EPOCH FROM g.at) * 1000)::float8 AS "takenAtMs",
        g.max_starts AS "maxStarts", g.period_ms AS "periodMs", g.burst`,
    /** $1 type, $2 tokens, $3 takenAt: core refundToRateBucket, in SQL. */
    giveBack: `WITH b AS (
        SELECT type, max_starts, period_ms, burst, tokens, refilled_at,
               GREATEST(refilled_at, clock_timestamp()) AS at
        FROM ${rl} WHERE type = $1 FOR UPDATE
      )
      UPDATE ${rl} AS r SET refilled_at = b.at, tokens = LEAST(b.burst::float8, ${level('b', 'b.at')}
          + GREATEST(0, $2::integer - GREATEST(0, (EXTRACT(EPOCH FROM (b.at - $3::timestamptz)) * 1000)::float8)
            * (b.max_starts - b.burst) / b.period_ms))
      FROM b WHERE r.type = b.type`,
  };
}

/** The `<table>_rate_limits` rows on the store's connection; every number read back is text. */
export function postgresRateLimitStatements(
  on: PostgresStatements & Pick<PostgresConnection<unknown>, 'hot'>,
  n: TableNames,
): RateLimitStatements {
  const sql = rateLimitSql(n);
  return {
    write: (limits) =>
      on.query(sql.declare, [
        limits.map((l) => l.type),
        limits.map((l) => l.maxStarts),
        limits.map((l) => l.periodMs),
        limits.map((l) => l.burst),
      ]),
    read: async () =>
      (
        await on.query<{ type: string; maxStarts: string; periodMs: string; burst: string; tokens: string }>(
          sql.list,
        )
      ).rows.map((r) => ({ type: r.type, ...numbers(r, ['maxStarts', 'periodMs', 'burst', 'tokens']) })),
    // A take is part of a claim round, and a give-back of its end: both go the way of the claim,
    // prepared, on the hot path (whose commits do not wait for the WAL flush: a server crash may
    // forget the last fraction of a second of takes, as it forgets those claims).
    take: async (type, want, now) => {
      const [row] = await on.hot<
        Record<'granted' | 'tokens' | 'takenAtMs' | 'maxStarts' | 'periodMs' | 'burst', string>
      >(sql.take, [type, want, now]);
      return row ? numbers(row, ['granted', 'tokens', 'takenAtMs', 'maxStarts', 'periodMs', 'burst']) : null;
    },
    giveBack: async (type, n, takenAt) => {
      await on.hot(sql.giveBack, [type, n, takenAt]);
    },
  };
}

/** The columns `keys` of `row`, read as numbers. */
function numbers<K extends string>(row: Readonly<Record<K, string>>, keys: readonly K[]): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, Number(row[k])])) as Record<K, number>;
}
