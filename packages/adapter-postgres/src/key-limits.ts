import { keyWeightsJson, type KeyLimitStatements } from '@asynccmd/core/store-kit';
import { preparedRows, type PostgresConnection, type PostgresStatements } from './connection.js';
import type { TableNames } from './names.js';
import { postgresKeyedReader, type FlowKeySql } from './flow-keys.js';

/** `<table>_key_limits`, quoted and qualified (migration 16). */
export function keyLimitsTable(n: TableNames): string {
  return `${n.schema}."${n.tableName}_key_limits"`;
}

/** Migration 16: one row per key-limited type; a keyed claim locks it, then counts per key. */
export function keyLimitsDdl(n: TableNames): string {
  return `CREATE TABLE IF NOT EXISTS ${keyLimitsTable(n)} (
         type        TEXT    PRIMARY KEY,
         key_field   TEXT    NOT NULL,
         max_running INTEGER NOT NULL
       )`;
}

/** Migration 27: a weighted fair share's weights (keyWeightsJson's text; NULL: none). */
export function keyWeightsDdl(n: TableNames): string {
  return `ALTER TABLE ${keyLimitsTable(n)} ADD COLUMN IF NOT EXISTS key_weights TEXT`;
}

/** The statements of the key limits (migrations 16 and 27). */
export function keyLimitSql(n: TableNames) {
  const limits = keyLimitsTable(n);
  return {
    /** $1 type: its key-limit row, locked to the end of the claim's transaction; none without one. */
    lock: `SELECT key_field, max_running, key_weights FROM ${limits} WHERE type = $1 FOR UPDATE`,
    declare: `INSERT INTO ${limits} (type, key_field, max_running, key_weights)
      SELECT * FROM unnest($1::text[], $2::text[], $3::integer[], $4::text[])
      ON CONFLICT (type) DO UPDATE SET key_field = EXCLUDED.key_field, max_running = EXCLUDED.max_running,
        key_weights = EXCLUDED.key_weights`,
    list: `SELECT type, key_field AS "keyField", max_running AS "maxRunning", key_weights AS "weightsJson"
      FROM ${limits} ORDER BY type`,
  };
}

type KeyLimitSql = ReturnType<typeof keyLimitSql>;

/** A type's key-limit row as a keyed claim reads it under its lock. */
export interface LockedKeyLimit {
  readonly keyField: string;
  readonly maxRunning: number;
  /** The weights' stored text (keyWeightsJson), or null. */
  readonly weightsJson: string | null;
}

/**
 * Runs `claim(client, limit, before)` in a transaction that holds `type`'s key-limit row, so that
 * two claims never count the same RUNNING commands; `before` is what `beforeLock(client)` read in
 * the same transaction before it took the row (what may be read while another claim of the type
 * holds it). Nothing is claimed without a stored key limit.
 */
export function withinKeyLimit<Tx, Row, Before>(
  connection: PostgresConnection<Tx>,
  sql: KeyLimitSql,
  type: string,
  beforeLock: (tx: Tx) => Promise<Before>,
  claim: (tx: Tx, limit: LockedKeyLimit, before: Before) => Promise<Row[]>,
): Promise<Row[]> {
  return connection.claimTransaction(async (tx) => {
    const before = await beforeLock(tx);
    const locked = await preparedRows<
      Tx,
      { key_field: string; max_running: string; key_weights: string | null }
    >(connection, tx, sql.lock, [type]);
    const row = locked.rows[0];
    if (row === undefined) return [];
    const limit = {
      keyField: row.key_field,
      maxRunning: Number(row.max_running),
      weightsJson: row.key_weights,
    };
    return claim(tx, limit, before);
  });
}

/**
 * Declares the key fields of `limits` in one transaction with `write` (the limits' own upsert), then
 * gives each type's unfinished commands their keys from the field now (flow-keys.ts `rekey`).
 */
export function declareKeyed<Tx>(
  connection: PostgresConnection<Tx>,
  flow: FlowKeySql,
  limits: readonly { readonly type: string; readonly keyField: string }[],
  write: (on: PostgresStatements) => Promise<unknown>,
): Promise<void> {
  return connection.transaction(async (tx) => {
    const on: PostgresStatements = { query: (text, values) => connection.queryIn(tx, text, values) };
    await write(on);
    await on.query(flow.declare, [limits.map((l) => l.type), limits.map((l) => l.keyField)]);
    for (const l of limits) await on.query(flow.rekey, [l.type]);
  });
}

/** The `<table>_key_limits` statements on the store's connection. */
export function postgresKeyLimitStatements<Tx>(
  connection: PostgresConnection<Tx>,
  sql: KeyLimitSql,
  flow: FlowKeySql,
): KeyLimitStatements {
  return {
    reader: (type, now) => postgresKeyedReader(connection, flow, type, now.toISOString()),
    write: (limits) =>
      declareKeyed(connection, flow, limits, (on) =>
        on.query(sql.declare, [
          limits.map((l) => l.type),
          limits.map((l) => l.keyField),
          limits.map((l) => l.maxRunning),
          limits.map(keyWeightsJson),
        ]),
      ),
    read: async () =>
      (
        await connection.query<{
          type: string;
          keyField: string;
          maxRunning: string;
          weightsJson: string | null;
        }>(sql.list)
      ).rows.map((r) => ({
        type: r.type,
        keyField: r.keyField,
        maxRunning: Number(r.maxRunning),
        weightsJson: r.weightsJson,
      })),
  };
}
