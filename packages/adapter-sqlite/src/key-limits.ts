/** Migration 14: one row per key-limited type; a keyed claim reads it in its one statement. */
export function keyLimitsDdl(t: string): string {
  return `CREATE TABLE IF NOT EXISTS ${t}_key_limits (
        type        TEXT    PRIMARY KEY,
        key_field   TEXT    NOT NULL,
        max_running INTEGER NOT NULL
      )`;
}

/** Migration 15: one row per type with a rate limit per key, and one token bucket per key in use. */
export function keyRateLimitsDdl(t: string): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${t}_key_rate_limits (
        type       TEXT    PRIMARY KEY,
        key_field  TEXT    NOT NULL,
        max_starts INTEGER NOT NULL,
        period_ms  INTEGER NOT NULL,
        burst      INTEGER NOT NULL
      )`,
    // refilled_at_ms: epoch milliseconds with a fraction, on the database clock.
    `CREATE TABLE IF NOT EXISTS ${t}_key_rate_buckets (
        type           TEXT NOT NULL,
        bucket_key     TEXT NOT NULL,
        tokens         REAL NOT NULL,
        refilled_at_ms REAL NOT NULL,
        PRIMARY KEY (type, bucket_key)
      )`,
  ];
}

/**
 * The statements of the per-key rate limits (migration 15), run together in one IMMEDIATE
 * transaction (the write lock is the type's lock); its candidates are read as a keyed claim's
 * (flow-keys.ts).
 */
export function keyRateLimitSql(t: string) {
  return {
    keyRateLock: `SELECT key_field AS keyField, max_starts AS maxStarts, period_ms AS periodMs, burst,
        unixepoch('subsec') * 1000 AS nowMs
      FROM ${t}_key_rate_limits WHERE type = ?`,
    keyRateBuckets: `SELECT bucket_key AS key, tokens, refilled_at_ms AS refilledAtMs
      FROM ${t}_key_rate_buckets WHERE type = ? AND bucket_key IN (SELECT value FROM json_each(?))`,
    keyRateSave: `INSERT INTO ${t}_key_rate_buckets (type, bucket_key, tokens, refilled_at_ms) VALUES (?, ?, ?, ?)
      ON CONFLICT (type, bucket_key) DO UPDATE SET tokens = excluded.tokens, refilled_at_ms = excluded.refilled_at_ms`,
    /** The type's buckets full again at :nowMs. */
    keyRatePrune: `DELETE FROM ${t}_key_rate_buckets WHERE type = :type
      AND tokens + (:nowMs - refilled_at_ms) * (:maxStarts - :burst) / :periodMs >= :burst`,
    keyRateDeclare: `INSERT INTO ${t}_key_rate_limits (type, key_field, max_starts, period_ms, burst)
      VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (type) DO UPDATE SET key_field = excluded.key_field, max_starts = excluded.max_starts,
        period_ms = excluded.period_ms, burst = excluded.burst`,
    keyRateList: `SELECT type, key_field AS keyField, max_starts AS maxStarts, period_ms AS periodMs, burst
      FROM ${t}_key_rate_limits ORDER BY type`,
  };
}
