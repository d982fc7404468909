import { COMMAND_TABLE_COLUMNS, movedColumns } from '@asynccmd/core/store-kit';
import type { TableNames } from './names.js';
import type { PostgresConnection } from './connection.js';

/*
 * Finished commands leave the hot table (migration 21). The statement that completes a command
 * deletes its row from the command table and inserts it, finished, into the history table, so the
 * table that claims, heartbeats and reclaims read holds only unfinished work (and the few finished
 * rows that stay, below) however much history is kept: its pages and indexes stop growing with the
 * history, and the dead row versions vacuum must clear are the hot table's few.
 *
 * What stays in the command table when it finishes, updated in place as before:
 * - DEAD and CANCELLED commands: rare, and they still take part in the queue (an admin retry starts
 *   from DEAD; a DEAD command holds its ordering key; a cancelled dependant may revive);
 * - a command with dependants that ends DEAD or CANCELLED (the trigger settles those in place); one
 *   that succeeds moves too, and its completing statement settles its dependants (migration 22);
 * - a recurring schedule's tick: its once-per-tick key is a unique index of the command table,
 *   and must hold for the life of the row, finished or not.
 * Rows finished before this migration stay where they are until retention purges them.
 *
 * Every read of a command (get, list, stats, outcome counts, purge, the fencing checks of a retried
 * outcome, dependencies) reads both tables, each through its own indexes, in one statement: one
 * snapshot sees a command in exactly one of them, since it moves in one statement.
 */

/** Migration 21: the history table, with the indexes its readers use. */
export function historyDdl(n: TableNames): string[] {
  const h = n.history;
  return [
    // The command table's columns, defaults and checks; no identity: ids come from the command table.
    `CREATE TABLE IF NOT EXISTS ${h} (LIKE ${n.table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`,
    `ALTER TABLE ${h} ALTER COLUMN finished_at SET NOT NULL`,
    `DO $$ BEGIN
       IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = '${h.replace(/'/g, "''")}'::regclass AND contype = 'p') THEN
         ALTER TABLE ${h} ADD PRIMARY KEY (id);
       END IF;
     END $$`,
    // Lists (newest first), lists of a type or a business key, outcome counts by finish time.
    `CREATE INDEX IF NOT EXISTS ${n.index('h_created_idx')} ON ${h} (created_at, id)`,
    `CREATE INDEX IF NOT EXISTS ${n.index('h_type_biz_idx')} ON ${h} (type, biz_key)`,
    `CREATE INDEX IF NOT EXISTS ${n.index('h_finished_idx')} ON ${h} (finished_at)`,
  ];
}

/**
 * Whether the commonest complete (and the upgrade's move) takes a finished command out of the
 * command table (of the row aliased `c`): not when it has dependants, which the settling complete
 * moves (sql.ts), nor when it holds a schedule tick's key.
 */
export const MOVABLE = (c: string): string => `NOT ${c}.has_dependants AND ${c}.schedule_name IS NULL`;

/**
 * The statement that finishes the rows `done` deleted: INSERT INTO history, each column as the row
 * had it unless `finished` gives its new value (an SQL expression over `done`'s columns).
 */
export function insertFinished(n: TableNames, finished: Readonly<Record<string, string>>): string {
  return `INSERT INTO ${n.history} (${COMMAND_TABLE_COLUMNS.join(', ')})
        SELECT ${movedColumns(finished, 'done')} FROM done`;
}

/** Rows a batch of the upgrade's move takes: a short transaction, row locks on finished rows only. */
export const MOVE_BATCH = 5000;

/**
 * The upgrade's move of finished commands left in the command table (rows finished before
 * migration 21), one batch: up to $1 movable SUCCESS rows finished at or after $2, oldest first
 * through the outcome index, moved to the history. Answers how many moved and the last finish
 * time (the next batch's start). It locks only the rows it moves (claims never touch a finished
 * row; a row another statement holds is skipped, and stays readable where it is).
 */
export function moveFinishedBatch(n: TableNames): string {
  return `
      WITH picked AS (
        SELECT id FROM ${n.table} AS c
        WHERE c.status = 'SUCCESS' AND c.finished_at >= $2::timestamptz AND ${MOVABLE('c')}
        ORDER BY c.finished_at
        LIMIT $1
        FOR UPDATE SKIP LOCKED
      ), done AS (
        DELETE FROM ${n.table} AS c USING picked WHERE c.id = picked.id
        RETURNING c.*
      ), moved AS (
        ${insertFinished(n, {})}
        RETURNING finished_at
      )
      SELECT count(*)::int AS moved, max(finished_at) AS last FROM moved`;
}

/**
 * The planner settings of a move batch, for its transaction only: the ordered scan of the outcome
 * index whatever the table's statistics say (a never-analyzed table would get a sequential scan
 * and a sort of every row, per batch).
 */
export const MOVE_PLAN = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
        set_config('enable_sort', 'off', true)`;

/**
 * The whole move as one statement for psql (`migrate --print-sql`): a DO block committing after
 * each batch, so it must run outside a transaction block.
 */
export function moveFinishedScript(n: TableNames): string {
  const batch = moveFinishedBatch(n)
    .replace('$1', String(MOVE_BATCH))
    .replace('$2::timestamptz', 'moved_since');
  return `DO $move$
    DECLARE
      moved_since timestamptz := '-infinity';
      moved_now integer;
      moved_last timestamptz;
    BEGIN
      LOOP
        PERFORM ${MOVE_PLAN.replace(/^SELECT /, '')};
        ${batch.trim()} INTO moved_now, moved_last;
        COMMIT;
        EXIT WHEN moved_now = 0;
        moved_since := moved_last;
      END LOOP;
    END
    $move$`;
}

/**
 * Moves every movable finished row left in the command table, batch after batch, each in a short
 * transaction of its own (migrate() runs it after the versions). Claims go on meanwhile.
 */
export async function moveFinishedRows<Tx>(
  connection: PostgresConnection<Tx>,
  n: TableNames,
): Promise<number> {
  const batch = moveFinishedBatch(n);
  let since = '-infinity';
  let total = 0;
  for (;;) {
    const answer = await connection.transaction(async (tx) => {
      await connection.queryIn(tx, MOVE_PLAN);
      const moved = await connection.queryIn<{ moved: string; last: string | null }>(tx, batch, [
        MOVE_BATCH,
        since,
      ]);
      return moved.rows[0];
    });
    const moved = Number(answer?.moved ?? 0);
    if (moved === 0 || answer?.last == null) return total;
    total += moved;
    since = answer.last;
  }
}
