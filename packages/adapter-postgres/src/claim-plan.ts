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
 * (migration 5: due_idx; migration 8: claim_idx; since migration 28 perTypeDueIdsFunctionDdl's below).
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

/**
 * The claim's pick of due ids from the claim index led by type (migration 28), so that a claim of
 * some types never reads another type's backlog: with 100,000 due commands of one type, a claim of
 * another type read through all of them from the (priority, due time, id) index, 13-19 ms a claim.
 *
 * One type (the common claim: a group of one type, a limited or rated type): that type's own ordered
 * scan, stopped after LIMIT rows, as before. Several types: the types with a due command (one probe
 * each); one of them: its own scan again. Two or more: the claim order is over all of them, and a
 * scan with `type = ANY(…)` yields them type by type, so the pick goes in bounds. It reads, without
 * locking, the first `wanted` due rows of each busy type past the lower bound, and the `wanted`-th
 * of them all in claim order is the upper bound; then it locks (SKIP LOCKED) every row between the
 * bounds, at most `wanted`. Rows other claimers held are skipped as by the one-type scan, so a
 * round can come back short: up to four rounds, each from where the last bound ended. The unlocked
 * read locks nothing it does not take: a lock per row read would write to every row of every type.
 *
 * `claimable` is what a due PENDING row of the table as `c` must also meet; the bounds are rows of
 * the claim order, `>=` a lower bound (an id one past the last bound's is the same as `>` it).
 * `from`: the first lower bound is (from_priority, from_at, from_id) (core store-kit head-skip.ts).
 */
export function perTypeDueIdsFunctionDdl(n: TableNames, claimable: string, from = false): string {
  const t = n.table;
  const order = 'c.priority, c.next_run_at, c.id';
  // The index's predicate spelled out (migration 28), so every statement here may read it.
  const pending = `c.status = 'PENDING' AND c.created_at IS NOT NULL`;
  const due = (types: string): string =>
    `${pending} AND c.type = ${types} AND c.next_run_at <= due_by AND ${claimable}`;
  const after = `(${order}) >= (lo_priority, lo_at, lo_id)`;
  // Each busy type's rows between the bounds, from its own ordered scan of the index (a scan with
  // `type = ANY(…)` can be planned on another index, through every due row), locked.
  const lockedPick = (upper: boolean): string => `
          SELECT x.id FROM unnest(busy) AS ct(type)
          CROSS JOIN LATERAL (
            SELECT c.id FROM ${t} AS c
            WHERE ${due('ct.type')} AND ${after}${upper ? ` AND (${order}) <= (hi_priority, hi_at, hi_id)` : ''}
            ORDER BY ${order}
            LIMIT wanted
            FOR UPDATE SKIP LOCKED) AS x
          LIMIT wanted`;
  const name = from ? dueIdsFromFunction(n) : dueIdsFunction(n);
  const startAt = from ? ', from_priority smallint, from_at timestamptz, from_id bigint' : '';
  // No start position: the least of the claim order (no row has a negative id).
  const start = from ? ['from_priority', 'from_at', 'from_id'] : ['-32768', "'-infinity'", '-1'];
  return `
    CREATE OR REPLACE FUNCTION ${name}(due_by timestamptz, claim_types text[], max_rows integer${startAt})
    RETURNS SETOF bigint
    LANGUAGE plpgsql VOLATILE
    SET enable_sort = off
    SET enable_bitmapscan = off
    SET enable_seqscan = off
    SET jit = off
    SET search_path = pg_catalog, pg_temp
    ROWS 10
    AS $fn$
    DECLARE
      busy text[] := claim_types;
      lo_priority smallint := ${start[0]};
      lo_at timestamptz := ${start[1]};
      lo_id bigint := ${start[2]};
      hi_priority smallint;
      hi_at timestamptz;
      hi_id bigint;
      wanted integer := max_rows;
      got integer;
    BEGIN
      IF cardinality(claim_types) > 1 THEN
        SELECT array_agg(DISTINCT ct.type) INTO busy FROM unnest(claim_types) AS ct(type)
        CROSS JOIN LATERAL (
          SELECT 1 FROM ${t} AS c
          WHERE ${pending} AND c.type = ct.type AND c.next_run_at <= due_by AND ${after}
          LIMIT 1) AS one;
      END IF;
      IF busy IS NULL OR max_rows < 1 THEN RETURN; END IF;
      IF cardinality(busy) = 1 THEN
        RETURN QUERY SELECT c.id FROM ${t} AS c
          WHERE ${due('busy[1]')} AND ${after}
          ORDER BY ${order}
          LIMIT max_rows
          FOR UPDATE SKIP LOCKED;
        RETURN;
      END IF;
      FOR pass IN 1..4 LOOP
        SELECT x.priority, x.next_run_at, x.id INTO hi_priority, hi_at, hi_id
        FROM unnest(busy) AS ct(type)
        CROSS JOIN LATERAL (
          SELECT ${order} FROM ${t} AS c
          WHERE ${due('ct.type')} AND ${after}
          ORDER BY ${order}
          LIMIT wanted) AS x
        ORDER BY x.priority, x.next_run_at, x.id
        OFFSET wanted - 1 LIMIT 1;
        IF NOT FOUND THEN
          -- Fewer than wanted past the lower bound: every one of them.
          RETURN QUERY ${lockedPick(false)};
          RETURN;
        END IF;
        RETURN QUERY ${lockedPick(true)};
        GET DIAGNOSTICS got = ROW_COUNT;
        wanted := wanted - got;
        EXIT WHEN wanted <= 0;
        lo_priority := hi_priority;
        lo_at := hi_at;
        lo_id := hi_id + 1;
      END LOOP;
    END
    $fn$`;
}
