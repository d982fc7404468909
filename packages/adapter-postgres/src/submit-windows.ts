import { keyWindowFromRow, runThroughExecutor, type SubmitWindowStatements } from '@asynccmd/core/store-kit';
import { isSqlExecutor, type SqlExecutor } from '@asynccmd/core';
import type { PostgresConnection } from './connection.js';
import type { TableNames } from './names.js';

/** `<table>_submit_windows`, quoted and qualified (migration 26). */
function windowsTable(n: TableNames): string {
  return `${n.schema}."${n.tableName}_submit_windows"`;
}

/** Migration 26: the windows of leading-edge throttles, a row per (type, key) in use. */
export function submitWindowsDdl(n: TableNames): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${windowsTable(n)} (
       type       TEXT           NOT NULL,
       window_key TEXT           NOT NULL,
       opens_at   TIMESTAMPTZ(3),
       holder_id  BIGINT,
       PRIMARY KEY (type, window_key)
     )`,
    // The prune's order: the windows past first, empty rows before them.
    `CREATE INDEX IF NOT EXISTS ${n.index('submit_windows_opens')} ON ${windowsTable(n)} (opens_at NULLS FIRST)`,
  ];
}

function submitWindowSql(n: TableNames) {
  const w = windowsTable(n);
  return {
    /**
     * $1 type, $2 key. The conflict's update takes the row lock (after waiting for a submit that
     * holds it) and reads the row as that submit committed it.
     */
    hold: `INSERT INTO ${w} (type, window_key) VALUES ($1, $2)
      ON CONFLICT (type, window_key) DO UPDATE SET opens_at = ${w}.opens_at
      RETURNING (extract(epoch FROM opens_at) * 1000)::bigint::text AS "opensMs", holder_id::text AS holder`,
    set: `UPDATE ${w} SET opens_at = $3::timestamptz, holder_id = $4::bigint WHERE type = $1 AND window_key = $2`,
    /** $1 cutoff, $2 limit: rows a submit holds are skipped (they are in use). */
    prune: `DELETE FROM ${w} AS w USING (
        SELECT type, window_key FROM ${w} WHERE opens_at IS NULL OR opens_at < $1::timestamptz
        ORDER BY opens_at NULLS FIRST LIMIT $2 FOR UPDATE SKIP LOCKED
      ) AS old WHERE w.type = old.type AND w.window_key = old.window_key`,
  };
}

/** `<table>_submit_windows` in the caller's transaction (its client, or an SqlExecutor). */
export function postgresSubmitWindowStatements<Tx>(
  connection: PostgresConnection<Tx>,
  n: TableNames,
): SubmitWindowStatements<Tx> {
  const sql = submitWindowSql(n);
  const run = (tx: Tx | SqlExecutor, text: string, values: string[]) =>
    isSqlExecutor(tx)
      ? runThroughExecutor(tx, text, values, 'numbered')
      : connection.preparedIn<Record<string, unknown>>(tx, text, values);
  return {
    hold: async (tx, type, key) => keyWindowFromRow((await run(tx, sql.hold, [type, key]))[0]),
    set: async (tx, type, key, window) => {
      await run(tx, sql.set, [type, key, window.opensAt.toISOString(), window.holder]);
    },
    prune: async (before, limit) =>
      (await connection.query(sql.prune, [before.toISOString(), limit])).rowCount,
  };
}
