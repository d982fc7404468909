import { LIMITS } from '@asynccmd/core';

/*
 * The key of each command of a keyed type (key limits, fair share, rate limits per key) in a column
 * of its own, `flow_key`, written by triggers as the row is inserted or its payload replaced: the
 * value of the payload field `<table>_key_fields` names for the type, as text (at most
 * LIMITS.rateKeyChars characters); '' when the payload has no such field, or null or '' there; NULL
 * for a type without a key field (the triggers' WHEN finds no row: nothing is written). The
 * partial index `<table>_flow` holds the PENDING commands with a key by (type, key, priority, due
 * time, id), so a keyed claim reads a bounded number of rows per key (core keyed-reads.ts).
 */

/** The flow key of a command of `type` with `payload` (SQL expressions): NULL without a key field. */
const flowKeyOf = (t: string, type: string, payload: string): string =>
  `(SELECT substr(coalesce(nullif(CAST(json_extract(${payload}, '$.' || kf.key_field) AS TEXT), 'null'), ''),
                  1, ${LIMITS.rateKeyChars})
      FROM ${t}_key_fields AS kf WHERE kf.keyed_type = ${type})`;

/** A trigger keying the row NEW after `event`, when its type has a key field. */
const keying = (t: string, name: string, event: string): string =>
  `CREATE TRIGGER IF NOT EXISTS ${t}_${name} AFTER ${event} ON ${t}
     WHEN EXISTS (SELECT 1 FROM ${t}_key_fields WHERE keyed_type = NEW.type)
     BEGIN
       UPDATE ${t} SET flow_key = ${flowKeyOf(t, 'NEW.type', 'NEW.payload')} WHERE id = NEW.id;
     END`;

/** Migration 19: the key fields, the column, its index, the triggers, and the keys of what is stored. */
export function flowKeysDdl(t: string): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${t}_key_fields (
        keyed_type TEXT PRIMARY KEY,
        key_field  TEXT NOT NULL
      )`,
    `ALTER TABLE ${t} ADD COLUMN flow_key TEXT`,
    `CREATE INDEX IF NOT EXISTS ${t}_flow ON ${t} (type, flow_key, priority, next_run_at, id)
       WHERE status = 'PENDING' AND flow_key IS NOT NULL`,
    keying(t, 'flow_key_insert', 'INSERT'),
    keying(t, 'flow_key_payload', 'UPDATE OF payload'),
    `INSERT INTO ${t}_key_fields (keyed_type, key_field)
       SELECT type, key_field FROM ${t}_key_rate_limits
       UNION ALL SELECT type, key_field FROM ${t}_key_limits WHERE true
       ON CONFLICT (keyed_type) DO NOTHING`,
    `UPDATE ${t} SET flow_key = ${flowKeyOf(t, `${t}.type`, `${t}.payload`)}
       WHERE status IN ('WAITING', 'PENDING', 'RUNNING') AND type IN (SELECT keyed_type FROM ${t}_key_fields)`,
  ];
}

/**
 * The statements of the flow keys: a declaration's, and a keyed claim's reads. `claimable` is the
 * claim's own conditions on the row aliased `due`.
 */
export function flowKeySql(t: string, claimable: string) {
  const keyed = (alias: string): string =>
    `${alias}.type = :type AND ${alias}.status = 'PENDING' AND ${alias}.flow_key IS NOT NULL`;
  return {
    flowKeyDeclare: `INSERT INTO ${t}_key_fields (keyed_type, key_field) VALUES (?, ?)
       ON CONFLICT (keyed_type) DO UPDATE SET key_field = excluded.key_field`,
    /** The keys of the type's unfinished commands from its key field now (see the PostgreSQL store's `rekey`). */
    flowRekey: `UPDATE ${t} SET flow_key = ${flowKeyOf(t, `${t}.type`, `${t}.payload`)}
       WHERE id IN (SELECT id FROM ${t} INDEXED BY ${t}_claim_type WHERE status = 'PENDING' AND type = :type
                    UNION ALL SELECT id FROM ${t} INDEXED BY ${t}_lease WHERE status = 'RUNNING' AND type = :type)
         AND flow_key IS NOT ${flowKeyOf(t, `${t}.type`, `${t}.payload`)}`,
    /**
     * The first PENDING command of each (key, priority) of :type: a loose scan of the flow index,
     * each step one search for the first entry after the pair before — of its key at a later
     * priority, else of the next key (two ranges: SQLite searches a row value by its first column).
     */
    flowHeads: `WITH RECURSIVE pairs(id) AS (
         SELECT (SELECT f.id FROM ${t} AS f INDEXED BY ${t}_flow WHERE ${keyed('f')}
                 ORDER BY f.flow_key, f.priority, f.next_run_at, f.id LIMIT 1)
         UNION ALL
         SELECT coalesce(
                  (SELECT f.id FROM ${t} AS f INDEXED BY ${t}_flow
                   WHERE ${keyed('f')} AND f.flow_key = prev.flow_key AND f.priority > prev.priority
                   ORDER BY f.priority, f.next_run_at, f.id LIMIT 1),
                  (SELECT f.id FROM ${t} AS f INDEXED BY ${t}_flow
                   WHERE ${keyed('f')} AND f.flow_key > prev.flow_key
                   ORDER BY f.flow_key, f.priority, f.next_run_at, f.id LIMIT 1))
         FROM pairs JOIN ${t} AS prev ON prev.id = pairs.id)
       SELECT c.flow_key AS key, c.priority, c.next_run_at AS nextRunAtMs, CAST(c.id AS TEXT) AS id
       FROM pairs JOIN ${t} AS c ON c.id = pairs.id`,
    flowRunning: `SELECT flow_key AS key, count(*) AS n FROM ${t} INDEXED BY ${t}_lease
       WHERE status = 'RUNNING' AND type = ? AND flow_key <> '' GROUP BY flow_key`,
    /**
     * Of (:key, :priority), the first :rows due, claimable commands: a range of the flow index up to
     * :now. Run once per key a claim reads; its LIMIT is an expression because a bare bound one
     * costs SQLite about 10 µs more per run (13.5 against 3.3 µs per search, measured).
     */
    flowRows: `SELECT CAST(due.id AS TEXT) AS id, due.flow_key AS key, due.priority, due.next_run_at AS nextRunAtMs
       FROM ${t} AS due INDEXED BY ${t}_flow
       WHERE ${keyed('due')} AND due.flow_key = :key AND due.priority = :priority AND due.next_run_at <= :now
         AND ${claimable}
       ORDER BY due.next_run_at, due.id LIMIT CAST(:rows AS INTEGER)`,
  };
}
