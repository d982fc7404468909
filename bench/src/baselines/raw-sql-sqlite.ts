import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import type { BenchPayload } from '../protocol.js';
import type { ClaimedBatch } from './claim-loop.js';
import { succeededValues } from './moved-row.js';

/**
 * The SQLite raw-SQL baseline on asynccmd's own table: one `UPDATE … RETURNING` claims the oldest
 * due batch under a fresh token (SQLite has one writer, so no row is claimed twice), one UPDATE
 * completes it, fenced by that token.
 */

export const SQLITE_TABLE = 'async_command';
const NOW = `CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)`;

/** A connection configured as the adapter configures its own: WAL, busy timeout, NORMAL sync. */
export function openSqlite(filename: string): Database.Database {
  const db = new Database(filename);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('synchronous = NORMAL');
  return db;
}

/** Pre-inserts `count` PENDING commands of `type`, due a second ago, payload {seq} for seq 1..count. */
export function seedPendingSqlite(db: Database.Database, type: string, count: number): void {
  db.prepare(
    `WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ?)
     INSERT INTO ${SQLITE_TABLE} (type, payload, status, max_retry, next_run_at, headers, created_at, updated_at)
     SELECT ?, json_object('seq', n), 'PENDING', 5, ${NOW} - 1000, '{}', ${NOW}, ${NOW} FROM s`,
  ).run(count, type);
}

interface ClaimedRow {
  id: number;
  payload: string;
}

/** The next batch of up to `limit` commands under a fresh token, or null when none is due. */
export function claimSqliteBatch(db: Database.Database, type: string, limit: number): ClaimedBatch | null {
  const token = randomUUID();
  const rows = db
    .prepare<[string, number, string, number], ClaimedRow>(
      `UPDATE ${SQLITE_TABLE}
       SET status = 'RUNNING', claim_token = ?, lease_until = ${NOW} + ?, started_at = ${NOW}, updated_at = ${NOW}
       WHERE status = 'PENDING' AND id IN (
         SELECT id FROM ${SQLITE_TABLE} INDEXED BY ${SQLITE_TABLE}_due
         WHERE status = 'PENDING' AND next_run_at <= ${NOW} AND type = ?
         ORDER BY next_run_at, id LIMIT ?)
       RETURNING id, payload`,
    )
    .all(token, 60_000, type, limit);
  if (rows.length === 0) return null;
  return {
    payloads: rows.map((r) => JSON.parse(r.payload) as BenchPayload),
    complete: async () => {
      // As the adapter completes (its migration 20): the rows move to the history, in one transaction.
      const [move, drop] = moveStatements(db);
      db.transaction(() => {
        move.run(token);
        drop.run(token);
      })();
    },
  };
}

const SUCCEEDED = succeededValues(NOW);

const moves = new WeakMap<Database.Database, [Database.Statement<[string]>, Database.Statement<[string]>]>();

/** The copy of a claim's RUNNING rows into the history, and their delete, prepared once per handle. */
function moveStatements(db: Database.Database): [Database.Statement<[string]>, Database.Statement<[string]>] {
  let statements = moves.get(db);
  if (statements === undefined) {
    const columns = db
      .prepare<[string], string>('SELECT name FROM pragma_table_info(?) ORDER BY cid')
      .pluck()
      .all(`${SQLITE_TABLE}_history`);
    statements = [
      db.prepare<[string]>(
        `INSERT INTO ${SQLITE_TABLE}_history (${columns.join(', ')})
         SELECT ${columns.map((c) => SUCCEEDED[c] ?? c).join(', ')} FROM ${SQLITE_TABLE}
         WHERE status = 'RUNNING' AND claim_token = ?`,
      ),
      db.prepare<[string]>(`DELETE FROM ${SQLITE_TABLE} WHERE status = 'RUNNING' AND claim_token = ?`),
    ];
    moves.set(db, statements);
  }
  return statements;
}
