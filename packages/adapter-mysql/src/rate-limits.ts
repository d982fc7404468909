import type { Pool, PoolConnection } from 'mysql2/promise';
import type { RateLimitStatements, RateTakeRow } from '@asynccmd/core/store-kit';
import { type RateBucket } from '@asynccmd/core';
import { inTransaction, retryLockConflicts, select, write } from './connection.js';
import { refundToRateBucket, takeFromRateBucket } from '@asynccmd/core/store-kit';

/**
 * Migration 13: one token bucket per rate-limited type. The type compares as the command table's
 * type column does; refilled_at is UTC with microseconds, so each take refills from it exactly.
 */
export function rateLimitsDdl(t: string, collation: string): string {
  return `CREATE TABLE IF NOT EXISTS \`${t}_rate_limits\` (
         type        VARCHAR(128) NOT NULL,
         max_starts  INT          NOT NULL,
         period_ms   INT          NOT NULL,
         burst       INT          NOT NULL,
         tokens      DOUBLE       NOT NULL,
         refilled_at DATETIME(6)  NOT NULL,
         PRIMARY KEY (type)
       ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ${collation}`;
}

const EPOCH = `'1970-01-01 00:00:00'`;
/** Microseconds since the epoch of the row's last refill, and of the database clock now (UTC). */
const SINCE_EPOCH_US = (column: string): string => `TIMESTAMPDIFF(MICROSECOND, ${EPOCH}, ${column})`;
/** The row's tokens refilled to now (core refillRateBucket, in SQL). */
const LEVEL_NOW = `LEAST(burst, tokens + GREATEST(0, TIMESTAMPDIFF(MICROSECOND, refilled_at, UTC_TIMESTAMP(6)))
    / 1000 * (max_starts - burst) / period_ms)`;

function rateLimitSql(t: string) {
  const rl = `\`${t}_rate_limits\``;
  return {
    // MySQL applies the assignments left to right: tokens is refilled from the old row (at its old
    // rate) before refilled_at and the limit change. A new type's bucket starts full.
    declare: (n: number) => `INSERT INTO ${rl} (type, max_starts, period_ms, burst, tokens, refilled_at)
      VALUES ${Array.from({ length: n }, () => '(?, ?, ?, ?, ?, UTC_TIMESTAMP(6))').join(', ')}
      ON DUPLICATE KEY UPDATE
        tokens = LEAST(VALUES(burst), ${LEVEL_NOW}),
        refilled_at = GREATEST(refilled_at, UTC_TIMESTAMP(6)),
        max_starts = VALUES(max_starts), period_ms = VALUES(period_ms), burst = VALUES(burst)`,
    list: `SELECT type, max_starts AS maxStarts, period_ms AS periodMs, burst, ${LEVEL_NOW} AS tokens
      FROM ${rl} ORDER BY type`,
    /**
     * The bucket, locked to the end of the transaction. The clock is read as the statement starts,
     * perhaps before a wait on another taker's lock: the bucket never refills backwards
     * (refillRateBucket), so that loses no time.
     */
    lock: `SELECT max_starts AS maxStarts, period_ms AS periodMs, burst, tokens,
        ${SINCE_EPOCH_US('refilled_at')} AS refilledUs, ${SINCE_EPOCH_US('UTC_TIMESTAMP(6)')} AS nowUs
      FROM ${rl} WHERE type = ? FOR UPDATE`,
    update: `UPDATE ${rl} SET tokens = ?, refilled_at = TIMESTAMPADD(MICROSECOND, ?, ${EPOCH}) WHERE type = ?`,
  };
}

interface LockedBucket {
  readonly bucket: RateBucket;
  /** The database clock, epoch ms (fractional). */
  readonly nowMs: number;
}

/**
 * `step(bucket)` on the type's bucket in a short READ COMMITTED transaction: the row is locked
 * (SELECT … FOR UPDATE: MariaDB has no UPDATE … RETURNING), then written back by an UPDATE. On
 * Galera that UPDATE is what certification sees conflict between two nodes: the loser is rolled
 * back and tried again. Null without a stored limit.
 */
async function onBucket<T>(
  pool: Pool,
  sql: ReturnType<typeof rateLimitSql>,
  type: string,
  step: (locked: LockedBucket) => { tokens: number; atMs: number; result: T },
): Promise<T | null> {
  return retryLockConflicts(() =>
    inTransaction(pool, true, async (conn: PoolConnection) => {
      const [row] = await select<{
        maxStarts: number;
        periodMs: number;
        burst: number;
        tokens: number;
        refilledUs: string | number;
        nowUs: string | number;
      }>(conn, sql.lock, [type]);
      if (row === undefined) return null;
      const bucket: RateBucket = {
        maxStarts: Number(row.maxStarts),
        periodMs: Number(row.periodMs),
        burst: Number(row.burst),
        tokens: Number(row.tokens),
        refilledAtMs: Number(row.refilledUs) / 1000,
      };
      const next = step({ bucket, nowMs: Number(row.nowUs) / 1000 });
      await write(conn, sql.update, [next.tokens, Math.round(next.atMs * 1000), type]);
      return next.result;
    }),
  );
}

/** The `<table>_rate_limits` rows on the store's pool. */
export function mysqlRateLimitStatements(pool: Pool, t: string): RateLimitStatements {
  const sql = rateLimitSql(t);
  return {
    write: (limits) =>
      write(
        pool,
        sql.declare(limits.length),
        limits.flatMap((l) => [l.type, l.maxStarts, l.periodMs, l.burst, l.burst]),
      ),
    read: async () =>
      (
        await select<{ type: string; maxStarts: number; periodMs: number; burst: number; tokens: number }>(
          pool,
          sql.list,
        )
      ).map((r) => ({ ...r, tokens: Number(r.tokens) })),
    take: (type, want, now) =>
      onBucket<RateTakeRow>(pool, sql, type, ({ bucket, nowMs }) => {
        const taken = takeFromRateBucket(bucket, want, now === null ? nowMs : now.getTime());
        return {
          tokens: taken.tokens,
          atMs: taken.atMs,
          result: { ...bucket, granted: taken.granted, tokens: taken.tokens, takenAtMs: taken.atMs },
        };
      }),
    giveBack: (type, n, takenAt) =>
      onBucket(pool, sql, type, ({ bucket, nowMs }) => ({
        ...refundToRateBucket(bucket, n, takenAt.getTime(), nowMs),
        result: null,
      })),
  };
}
