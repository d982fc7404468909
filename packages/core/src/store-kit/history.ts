/**
 * The columns of the command table, in order, as every adapter's migrations leave it (the same
 * names on each database; MySQL/MariaDB, which has no history, adds a generated `flow_rank` a
 * write never names): the history table a finished command moves to keeps the same, so the move
 * copies each column as it is, or as the finishing write sets it. The PostgreSQL and SQLite store
 * tests hold both tables' columns to this list.
 */
export const COMMAND_TABLE_COLUMNS = [
  'id',
  'type',
  'biz_key',
  'payload',
  'status',
  'max_retry',
  'retry_count',
  'rescue_count',
  'next_run_at',
  'last_error',
  'owner',
  'claim_token',
  'lease_until',
  'idempotent',
  'headers',
  'created_at',
  'updated_at',
  'started_at',
  'finished_at',
  'claimed_by',
  'retry_count_at_retry',
  'rescue_count_at_retry',
  'history',
  'schedule_name',
  'schedule_tick',
  'priority',
  'ordering_key',
  'result',
  'waiting_for',
  'blocked_by',
  'has_dependants',
  'dependency_cancelled',
  'progress_done',
  'progress_total',
  // The key of a keyed type's command (flow control): only unfinished commands' keys are read (by
  // keyed claims, from the command table), but the history keeps the row as it finished, as a
  // command finished in place does.
  'flow_key',
] as const;

/**
 * The select list that copies a row into the history: each column of COMMAND_TABLE_COLUMNS as the
 * row has it (`source.column`, or the bare column without a source), unless `finished` gives its
 * new value (an SQL expression).
 */
export function movedColumns(finished: Readonly<Record<string, string>>, source?: string): string {
  return COMMAND_TABLE_COLUMNS.map((c) => finished[c] ?? (source === undefined ? c : `${source}.${c}`)).join(
    ', ',
  );
}
