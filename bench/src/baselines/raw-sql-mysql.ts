import { randomUUID } from 'node:crypto';
import type mysql from 'mysql2/promise';
import type { BenchPayload } from '../protocol.js';
import type { ClaimedBatch } from './claim-loop.js';

/**
 * The MySQL/MariaDB raw-SQL baseline: asynccmd's two-step SKIP LOCKED claim (lock due ids and mark
 * them with a fresh token in a short READ COMMITTED transaction, then read the rows back by token)
 * and its batched, token-fenced complete, run from a bare loop on asynccmd's own table.
 */

export const MYSQL_TABLE = 'async_command';
const DB_NOW = 'UTC_TIMESTAMP(3)';
const LEASE_MICROS = 60_000_000;

/** 0 … 10^6−1 from six cross-joined digit sets: portable to MySQL 8 and MariaDB, no recursion limits. */
const NUMBERS = `(SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 100000 * g.d AS n
  FROM bench_digits a, bench_digits b, bench_digits c, bench_digits e, bench_digits f, bench_digits g)`;

export async function ensureDigits(conn: mysql.Pool): Promise<void> {
  await conn.query('CREATE TABLE IF NOT EXISTS bench_digits (d INT PRIMARY KEY)');
  await conn.query('INSERT IGNORE INTO bench_digits (d) VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)');
}

/** Pre-inserts `count` PENDING commands of `type`, due a second ago, payload {seq} for seq 1..count. */
export async function seedPendingMysql(pool: mysql.Pool, type: string, count: number): Promise<void> {
  await ensureDigits(pool);
  await pool.query(
    `INSERT INTO ${MYSQL_TABLE} (type, payload, status, max_retry, next_run_at, headers, created_at, updated_at)
     SELECT ?, CONCAT('{"seq":', n, '}'), 'PENDING', 5, ${DB_NOW} - INTERVAL 1 SECOND, '{}', ${DB_NOW}, ${DB_NOW}
     FROM ${NUMBERS} numbers WHERE n BETWEEN 1 AND ? ORDER BY n`,
    [type, count],
  );
}

/** Bulk-inserts finished (SUCCESS) rows of another type: history the claim must not wade through. */
export async function seedFinishedMysql(pool: mysql.Pool, count: number): Promise<void> {
  if (count <= 0) return;
  await ensureDigits(pool);
  await pool.query(
    `INSERT INTO ${MYSQL_TABLE}
       (type, payload, status, max_retry, next_run_at, headers, created_at, updated_at, started_at, finished_at)
     SELECT 'bench.finished', CONCAT('{"seq":-', n, '}'), 'SUCCESS', 5, ${DB_NOW} - INTERVAL 1 HOUR, '{}',
            ${DB_NOW} - INTERVAL 1 HOUR, ${DB_NOW}, ${DB_NOW}, ${DB_NOW}
     FROM ${NUMBERS} numbers WHERE n BETWEEN 1 AND ? ORDER BY n`,
    [count],
  );
}

interface ClaimedRow extends mysql.RowDataPacket {
  id: string;
  claim_token: string;
  payload: string;
}

/** UTC text of the application clock, as the adapter binds due times. */
function utcNow(): string {
  return new Date().toISOString().replace('T', ' ').replace('Z', '');
}

/** Step 1 (SKIP LOCKED) and step 2 (read back by token), as the adapter runs them. */
async function claim(pool: mysql.Pool, type: string, limit: number, token: string): Promise<ClaimedRow[]> {
  const conn = await pool.getConnection();
  try {
    await conn.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
    await conn.query('START TRANSACTION');
    try {
      const [due] = await conn.query<mysql.RowDataPacket[]>(
        `SELECT id FROM ${MYSQL_TABLE} WHERE status = 'PENDING' AND next_run_at <= ? AND type IN (?)
         ORDER BY next_run_at, id LIMIT ? FOR UPDATE SKIP LOCKED`,
        [utcNow(), [type], limit],
      );
      const ids = due.map((r) => String(r['id']));
      if (ids.length > 0) {
        await conn.query(
          `UPDATE ${MYSQL_TABLE}
           SET status = 'RUNNING', claim_token = ?, lease_until = ${DB_NOW} + INTERVAL ? MICROSECOND,
               started_at = ${DB_NOW}, updated_at = ${DB_NOW}
           WHERE id IN (?) AND status = 'PENDING'`,
          [token, LEASE_MICROS, ids],
        );
      }
      await conn.query('COMMIT');
      if (ids.length === 0) return [];
    } catch (err) {
      await conn.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  } finally {
    conn.release();
  }
  const [rows] = await pool.query<ClaimedRow[]>(
    `SELECT id, type, biz_key, payload, status, max_retry, retry_count, rescue_count, next_run_at, last_error,
            owner, claim_token, lease_until, idempotent, headers, created_at, updated_at, started_at, finished_at
     FROM ${MYSQL_TABLE} WHERE claim_token = ? AND status = 'RUNNING' ORDER BY next_run_at, id`,
    [token],
  );
  return rows;
}

/** The adapter's batched complete, fenced by (id, claim_token) pairs, marking the rows it finishes. */
async function complete(pool: mysql.Pool, rows: readonly ClaimedRow[]): Promise<number> {
  const pairs = rows.flatMap((r) => [r.id, r.claim_token]);
  const [result] = await pool.query<mysql.ResultSetHeader>(
    `UPDATE ${MYSQL_TABLE}
     SET status = 'SUCCESS', claim_token = ?, lease_until = NULL, finished_at = ${DB_NOW}, updated_at = ${DB_NOW}
     WHERE status = 'RUNNING' AND (id, claim_token) IN (${rows.map(() => '(?, ?)').join(', ')})`,
    [`done:${randomUUID()}`, ...pairs],
  );
  return result.affectedRows;
}

/** The next batch of up to `limit` commands under a fresh token, or null when none is due. */
export async function claimMysqlBatch(
  pool: mysql.Pool,
  type: string,
  limit: number,
): Promise<ClaimedBatch | null> {
  const rows = await retryLockConflicts(() => claim(pool, type, limit, randomUUID()));
  if (rows.length === 0) return null;
  return {
    payloads: rows.map((r) => JSON.parse(r.payload) as BenchPayload),
    complete: async () => {
      await retryLockConflicts(() => complete(pool, rows));
    },
  };
}

/** As the adapter does: a deadlock or lock-wait timeout is retried, never fatal. */
async function retryLockConflicts<T>(fn: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (!isLockConflict(err)) throw err;
    }
  }
}

function isLockConflict(err: unknown): boolean {
  const errno = (err as { errno?: unknown } | null)?.errno;
  return errno === 1213 || errno === 1205;
}
