import { keyWindowFromRow, runThroughExecutor, type SubmitWindowStatements } from '@asynccmd/core/store-kit';
import { isSqlExecutor, type SqlExecutor, type SqlValue } from '@asynccmd/core';
import type Database from 'better-sqlite3';

/** Migration 21: the windows of leading-edge throttles, a row per (type, key) in use. */
export function submitWindowsDdl(t: string): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${t}_submit_windows (
      type       TEXT    NOT NULL,
      window_key TEXT    NOT NULL,
      opens_at   INTEGER,
      holder_id  INTEGER,
      PRIMARY KEY (type, window_key)
    )`,
    `CREATE INDEX IF NOT EXISTS ${t}_submit_windows_opens ON ${t}_submit_windows (opens_at)`,
  ];
}

export function submitWindowSql(t: string) {
  const w = `${t}_submit_windows`;
  return {
    /** Inserts the key's empty row or reads the one there, under the write lock (one writer). */
    windowHold: `INSERT INTO ${w} (type, window_key) VALUES (?, ?)
      ON CONFLICT (type, window_key) DO UPDATE SET opens_at = opens_at
      RETURNING CAST(opens_at AS TEXT) AS opensMs, CAST(holder_id AS TEXT) AS holder`,
    windowSet: `UPDATE ${w} SET opens_at = ?, holder_id = CAST(? AS INTEGER) WHERE type = ? AND window_key = ?`,
    windowPrune: `DELETE FROM ${w} WHERE rowid IN (
      SELECT rowid FROM ${w} WHERE opens_at IS NULL OR opens_at < ? ORDER BY opens_at LIMIT ?)`,
  };
}

type WindowSql = ReturnType<typeof submitWindowSql>;

/**
 * `<table>_submit_windows` in the caller's transaction (a database handle, or an SqlExecutor).
 * `prepare` gives the statement of `sql` named so, cached per handle; `prune` runs on the store's
 * own handle through `runOwn`.
 */
export function sqliteSubmitWindowStatements(
  sql: WindowSql,
  prepare: (db: Database.Database, name: keyof WindowSql) => Database.Statement,
  runOwn: <T>(op: () => T) => Promise<T>,
  own: Database.Database,
): SubmitWindowStatements<Database.Database> {
  const run = async (
    name: keyof WindowSql,
    tx: Database.Database | SqlExecutor,
    values: SqlValue[],
  ): Promise<readonly Record<string, unknown>[]> => {
    if (isSqlExecutor(tx)) return runThroughExecutor(tx, sql[name], values, 'question-mark');
    const statement = prepare(tx, name);
    if (statement.reader) return [statement.get(...values) as Record<string, unknown>];
    statement.run(...values);
    return [];
  };
  return {
    hold: async (tx, type, key) => keyWindowFromRow((await run('windowHold', tx, [type, key]))[0]),
    set: async (tx, type, key, window) => {
      await run('windowSet', tx, [window.opensAt.getTime(), window.holder, type, key]);
    },
    prune: (before, limit) => runOwn(() => prepare(own, 'windowPrune').run(before.getTime(), limit).changes),
  };
}
