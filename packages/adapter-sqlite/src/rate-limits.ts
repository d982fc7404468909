import type Database from 'better-sqlite3';
import { type RateBucket } from '@asynccmd/core';
import type { RateLimitStatements } from '@asynccmd/core/store-kit';
import { refundToRateBucket, takeFromRateBucket } from '@asynccmd/core/store-kit';

/** Migration 13: one token bucket per rate-limited type; refilled_at in epoch ms with a fraction. */
export function rateLimitsDdl(t: string): string {
  return `CREATE TABLE IF NOT EXISTS ${t}_rate_limits (
        type        TEXT    PRIMARY KEY,
        max_starts  INTEGER NOT NULL,
        period_ms   INTEGER NOT NULL,
        burst       INTEGER NOT NULL,
        tokens      REAL    NOT NULL,
        refilled_at REAL    NOT NULL
      )`;
}

/** The database clock in epoch ms, sub-millisecond: the refill needs every bit of elapsed time. */
const NOW_MS = `(unixepoch('subsec') * 1000)`;

function rateLimitSql(t: string) {
  const rl = `${t}_rate_limits`;
  const level = `MIN(burst, tokens + MAX(0, ${NOW_MS} - refilled_at) * (max_starts - burst) / period_ms)`;
  return {
    // SQLite evaluates every assignment against the old row: tokens is refilled at the old rate.
    declare: `INSERT INTO ${rl} (type, max_starts, period_ms, burst, tokens, refilled_at)
      VALUES (?, ?, ?, ?, ?, ${NOW_MS})
      ON CONFLICT (type) DO UPDATE SET
        tokens = MIN(excluded.burst, ${level}),
        refilled_at = MAX(refilled_at, ${NOW_MS}),
        max_starts = excluded.max_starts, period_ms = excluded.period_ms, burst = excluded.burst`,
    list: `SELECT type, max_starts AS maxStarts, period_ms AS periodMs, burst, ${level} AS tokens
      FROM ${rl} ORDER BY type`,
    read: `SELECT max_starts AS maxStarts, period_ms AS periodMs, burst, tokens, refilled_at AS refilledAtMs,
        ${NOW_MS} AS nowMs FROM ${rl} WHERE type = ?`,
    update: `UPDATE ${rl} SET tokens = ?, refilled_at = ? WHERE type = ?`,
  };
}

/**
 * The `<table>_rate_limits` rows. `run` is the store's way of running a synchronous operation on
 * its handle (waiting out other transactions); each take and give-back is one IMMEDIATE
 * transaction, so a taker in another process waits for the write lock and then reads what this one
 * left.
 */
export function sqliteRateLimitStatements(
  db: Database.Database,
  table: string,
  run: <T>(op: () => T) => Promise<T>,
): RateLimitStatements {
  const sql = rateLimitSql(table);
  const prepared = new Map<string, Database.Statement>();
  const stmt = (text: string): Database.Statement => {
    let s = prepared.get(text);
    if (s === undefined) prepared.set(text, (s = db.prepare(text)));
    return s;
  };
  const onBucket = <T>(
    type: string,
    step: (bucket: RateBucket, nowMs: number) => { tokens: number; atMs: number; result: T },
  ): Promise<T | null> =>
    run(() =>
      db
        .transaction((): T | null => {
          const bucket = stmt(sql.read).get(type) as (RateBucket & { nowMs: number }) | undefined;
          if (bucket === undefined) return null;
          const next = step(bucket, bucket.nowMs);
          stmt(sql.update).run(next.tokens, next.atMs, type);
          return next.result;
        })
        .immediate(),
    );
  return {
    write: (limits) =>
      run(() =>
        db.transaction(() => {
          for (const l of limits) stmt(sql.declare).run(l.type, l.maxStarts, l.periodMs, l.burst, l.burst);
        })(),
      ),
    read: () =>
      run(
        () =>
          stmt(sql.list).all() as {
            type: string;
            maxStarts: number;
            periodMs: number;
            burst: number;
            tokens: number;
          }[],
      ),
    take: (type, want, now) =>
      onBucket(type, (bucket, nowMs) => {
        const taken = takeFromRateBucket(bucket, want, now === null ? nowMs : now.getTime());
        return {
          tokens: taken.tokens,
          atMs: taken.atMs,
          result: { ...bucket, granted: taken.granted, tokens: taken.tokens, takenAtMs: taken.atMs },
        };
      }),
    giveBack: (type, n, takenAt) =>
      onBucket(type, (bucket, nowMs) => ({
        ...refundToRateBucket(bucket, n, takenAt.getTime(), nowMs),
        result: null,
      })),
  };
}
