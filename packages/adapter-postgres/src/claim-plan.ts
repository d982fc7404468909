import type { TableNames } from './names.js';

/** The function that picks the ids a claim takes (schema-qualified, quoted). */
export const dueIdsFunction = (n: TableNames): string => `${n.schema}.${n.index('claim_due')}`;

/** The same pick, starting at a position of the claim order instead of its head (core store-kit head-skip.ts). */
export const dueIdsFromFunction = (n: TableNames): string => `${n.schema}.${n.index('claim_due_from')}`;

/**
 * The claim's pick of due ids, as a function whose planner settings are its own.
 *
 * The claim must read the due index in order and stop after LIMIT rows. Left to the planner, that
 * plan depends on table statistics: on a table never analyzed (freshly created or bulk-loaded,
 * autovacuum off), the planner guesses a handful of pending rows and prefers a bitmap scan (even
 * one combined with the (type, biz_key) index) followed by a sort of every pending row, on every
 * claim — with a million pending rows, a quarter of a second per claim. Sorts, bitmap scans and
 * sequential scans are switched off for this one statement only (the SET clauses last while the
 * function runs), which leaves the ordered scan of the due index as the only plan without a
 * penalty, whatever the statistics say. A function with SET clauses is never inlined, so the
 * settings are in force whenever its query is planned (a kept plan was planned under them too).
 *
 * search_path is pinned so the body resolves its operators and functions in pg_catalog only.
 * ROWS tells the calling UPDATE that few ids come back, so it joins them by primary key.
 * `claimable` is what a due PENDING row must also meet (a requeued row's old claim no longer holds
 * it, see sql.ts), `order` the claim order, which the index the function reads must hold
 * (migration 5: due_idx; migration 8: claim_idx).
 *
 * `language`: a LANGUAGE sql function (migrations 5 and 8) parses and plans its body on every
 * call; a PL/pgSQL one (migration 11) keeps the plan for the session, like a prepared statement.
 * Measured on a one-row claim: 0.50 → 0.28 ms round trip (p50), most of a wake-up's claim.
 */
export function dueIdsFunctionDdl(
  n: TableNames,
  claimable: string,
  order: string,
  language: 'sql' | 'plpgsql',
  from = false,
): string {
  // `from`: the scan starts at (from_priority, from_at, from_id) of the claim order, a start key of
  // the claim index, so the index entries before it are never read (core store-kit head-skip.ts).
  const pick = `
      SELECT id FROM ${n.table}
      WHERE status = 'PENDING' AND next_run_at <= due_by AND type = ANY(claim_types) AND ${claimable}${
        from
          ? `
        AND (${order}) >= (from_priority, from_at, from_id)`
          : ''
      }
      ORDER BY ${order}
      LIMIT max_rows
      FOR UPDATE SKIP LOCKED`;
  const name = from ? dueIdsFromFunction(n) : dueIdsFunction(n);
  const startAt = from ? ', from_priority smallint, from_at timestamptz, from_id bigint' : '';
  return `
    CREATE OR REPLACE FUNCTION ${name}(due_by timestamptz, claim_types text[], max_rows integer${startAt})
    RETURNS SETOF bigint
    LANGUAGE ${language} VOLATILE
    SET enable_sort = off
    SET enable_bitmapscan = off
    SET enable_seqscan = off
    SET search_path = pg_catalog, pg_temp
    ROWS 10
    AS $fn$${
      language === 'sql'
        ? pick
        : `
      BEGIN RETURN QUERY${pick};
      END`
    }
    $fn$`;
}
