import { COMMAND_TABLE_COLUMNS, movedColumns } from '@asynccmd/core/store-kit';

/*
 * Finished commands leave the command table (migration 20), as on PostgreSQL: completing a command
 * copies its row, finished, into `<table>_history` and deletes it from the command table, in the
 * completion's transaction, so the table the claims read keeps the unfinished work however much
 * history is kept; retention purges the history in batches like the command table. DEAD and
 * CANCELLED commands, commands with dependants (whose status update fires the settle triggers) and
 * recurring schedules' ticks (whose once-per-tick key is a unique index of the command table)
 * finish in place as before. Every read of a command reads both tables.
 */

/** Migration 20: the history table and the indexes its readers use. */
export function historyDdl(t: string): string[] {
  return [
    // The command table's columns; the id is the command's (no AUTOINCREMENT here: ids come from
    // the command table, whose sequence never hands one out twice).
    `CREATE TABLE IF NOT EXISTS ${t}_history (
        id                    INTEGER PRIMARY KEY,
        type                  TEXT    NOT NULL,
        biz_key               TEXT,
        payload               TEXT    NOT NULL,
        status                TEXT    NOT NULL,
        max_retry             INTEGER NOT NULL,
        retry_count           INTEGER NOT NULL,
        rescue_count          INTEGER NOT NULL,
        next_run_at           INTEGER NOT NULL,
        last_error            TEXT,
        owner                 TEXT,
        claim_token           TEXT,
        lease_until           INTEGER,
        idempotent            INTEGER NOT NULL,
        headers               TEXT    NOT NULL,
        created_at            INTEGER NOT NULL,
        updated_at            INTEGER NOT NULL,
        started_at            INTEGER,
        finished_at           INTEGER NOT NULL,
        claimed_by            TEXT,
        retry_count_at_retry  INTEGER NOT NULL,
        rescue_count_at_retry INTEGER NOT NULL,
        history               TEXT    NOT NULL,
        schedule_name         TEXT,
        schedule_tick         INTEGER,
        priority              INTEGER NOT NULL,
        ordering_key          TEXT,
        result                TEXT,
        waiting_for           INTEGER NOT NULL,
        blocked_by            INTEGER NOT NULL,
        has_dependants        INTEGER NOT NULL,
        dependency_cancelled  INTEGER NOT NULL,
        progress_done         INTEGER,
        progress_total        INTEGER,
        flow_key              TEXT
      )`,
    // Lists newest first (with or without a type or key), outcome counts and purges by finish time.
    `CREATE INDEX IF NOT EXISTS ${t}_history_created ON ${t}_history (created_at, id)`,
    `CREATE INDEX IF NOT EXISTS ${t}_history_type_biz ON ${t}_history (type, biz_key)`,
    `CREATE INDEX IF NOT EXISTS ${t}_history_finished ON ${t}_history (finished_at)`,
  ];
}

/** A finished row that may leave the command table (see above). */
export const MOVABLE = 'has_dependants = 0 AND schedule_name IS NULL';

/**
 * The copy of the rows of `t` that `where` picks into the history, each column as the row has it
 * unless `finished` gives its new value (an SQL expression over the row's columns).
 */
export function copyFinished(t: string, where: string, finished: Readonly<Record<string, string>>): string {
  return `INSERT INTO ${t}_history (${COMMAND_TABLE_COLUMNS.join(', ')})
       SELECT ${movedColumns(finished)} FROM ${t} NOT INDEXED
       WHERE ${where}`;
}
