import type { Connection, Pool } from 'mysql2/promise';
import { keyWindowFromRow, runThroughExecutor, type SubmitWindowStatements } from '@asynccmd/core/store-kit';
import { isSqlExecutor, type SqlExecutor, type SqlValue } from '@asynccmd/core';
import { select, write } from './connection.js';
import { toUtcText } from './rows.js';

/** Migration 20: the windows of leading-edge throttles, a row per (type, key) in use. */
export function submitWindowsDdl(t: string, collation: string): string[] {
  // The key compares as the command table's biz_key does (the same collation): it is one.
  return [
    `CREATE TABLE IF NOT EXISTS \`${t}_submit_windows\` (
       type       VARCHAR(128)    NOT NULL,
       window_key VARCHAR(255)    NOT NULL,
       opens_at   DATETIME(3)     NULL,
       holder_id  BIGINT UNSIGNED NULL,
       PRIMARY KEY (type, window_key),
       KEY idx_opens (opens_at)
     ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ${collation}`,
  ];
}

function submitWindowSql(t: string) {
  const w = `\`${t}_submit_windows\``;
  return {
    /** Inserts the key's empty row, or takes the lock of the one there (after a submit holding it). */
    lock: `INSERT INTO ${w} (type, window_key) VALUES (?, ?) ON DUPLICATE KEY UPDATE opens_at = opens_at`,
    /** A locking read: the row as last committed, whatever the transaction's snapshot. */
    read: `SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', opens_at) DIV 1000 AS CHAR) AS opensMs,
        CAST(holder_id AS CHAR) AS holder
      FROM ${w} WHERE type = ? AND window_key = ? FOR UPDATE`,
    set: `UPDATE ${w} SET opens_at = ?, holder_id = ? WHERE type = ? AND window_key = ?`,
    prune: `DELETE FROM ${w} WHERE opens_at IS NULL OR opens_at < ? ORDER BY opens_at LIMIT ?`,
  };
}

/** `<table>_submit_windows` in the caller's transaction (its connection, or an SqlExecutor). */
export function mysqlSubmitWindowStatements(pool: Pool, t: string): SubmitWindowStatements<Connection> {
  const sql = submitWindowSql(t);
  const run = (tx: Connection | SqlExecutor, text: string, values: SqlValue[]) =>
    isSqlExecutor(tx)
      ? runThroughExecutor(tx, text, values, 'question-mark')
      : select<Record<string, unknown>>(tx, text, values);
  return {
    hold: async (tx, type, key) => {
      await run(tx, sql.lock, [type, key]);
      return keyWindowFromRow((await run(tx, sql.read, [type, key]))[0]);
    },
    set: async (tx, type, key, window) => {
      await run(tx, sql.set, [toUtcText(window.opensAt), window.holder, type, key]);
    },
    prune: async (before, limit) => (await write(pool, sql.prune, [toUtcText(before), limit])).affectedRows,
  };
}
