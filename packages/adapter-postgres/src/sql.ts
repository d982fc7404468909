import { ACTIVE_STATUSES } from '@asynccmd/core';
import { dueIdsFromFunction, dueIdsFunction } from './claim-plan.js';
import { flowKeyOf, flowKeySql } from './flow-keys.js';
import { insertFinished, MOVABLE } from './history.js';
import { keyRateLimitSql } from './key-rate-limits.js';
import type { TableNames } from './names.js';
import { ATTEMPT_HISTORY_LENGTH } from '@asynccmd/core/store-kit';

/**
 * Every statement the store runs, for one table, built once. Values are always bound parameters;
 * the only spliced text is the validated, quoted table name.
 *
 * Times: rows keep milliseconds (TIMESTAMPTZ(3)); the database clock is truncated to the
 * millisecond, so what the store writes and what its now() reports agree exactly: a lease is hung
 * once that clock has passed it (`lease_until < now`), never a rounding step early.
 * Due times (`$now`, runAt, retry times) come from the application's clock; leases, startedAt,
 * updatedAt and finishedAt from the database's.
 */
const NOW = `date_trunc('milliseconds', now())`;
const lease = (param: string): string => `${NOW} + ${param}::float8 * interval '1 millisecond'`;

/**
 * Columns of a command row, in the order rows.ts reads them. The claims read them without the
 * result (CLAIM_COLUMNS): a claimed RUNNING row never has one (SUCCESS is final, and an admin retry
 * starts only from DEAD).
 */
const CLAIM_COLUMNS = `id, type, biz_key, payload, status, max_retry, retry_count, rescue_count, next_run_at,
  last_error, owner, claim_token, lease_until, idempotent, headers, created_at, updated_at, started_at,
  finished_at, retry_count_at_retry, rescue_count_at_retry, claimed_by, history, priority, ordering_key`;
const COLUMNS = `${CLAIM_COLUMNS}, result, progress_done, progress_total`;

/**
 * The columns a claimDue row comes back with: COLUMNS less what the claim itself wrote and the
 * store already knows (status RUNNING, the claim's token and instance, updated_at, which the claim
 * sets to started_at): fewer values for the server to format and for the store to read, for every
 * row of every claim (rows.ts claimedRecord puts them back).
 */
const CLAIMED_COLUMNS = `id, type, biz_key, payload, max_retry, retry_count, rescue_count, next_run_at, last_error,
  owner, lease_until, idempotent, headers, created_at, started_at, finished_at, retry_count_at_retry,
  rescue_count_at_retry, history, priority, ordering_key`;

/** A timestamptz in epoch milliseconds, as the history keeps times. */
const epochMs = (time: string): string => `(extract(epoch FROM ${time}) * 1000)::bigint`;

/**
 * The row's history (of the row aliased `c`) with the attempt its claim ran appended, ending now
 * with `outcome` and `error` (SQL expressions), and only the latest ATTEMPT_HISTORY_LENGTH kept:
 * the array never holds more, so dropping its first is enough. Written in the same UPDATE as the
 * outcome, so it costs no statement of its own.
 */
const withAttempt = (outcome: string, error: string): string =>
  `(CASE WHEN jsonb_array_length(c.history) >= ${ATTEMPT_HISTORY_LENGTH} THEN c.history - 0 ELSE c.history END)
     || jsonb_build_object('startedAt', ${epochMs('c.started_at')}, 'finishedAt', ${epochMs(NOW)},
          'instance', c.claimed_by, 'outcome', ${outcome}, 'error', ${error})`;

/**
 * A PENDING row no requeued claim holds back: a requeue keeps the old claim's token and lease on
 * the row until that claim lets go (releaseRevoked) or the lease runs out, its executor may still run.
 */
export const NOT_HELD_BACK = `(lease_until IS NULL OR lease_until < ${NOW})`;

/** Statuses in which a command holds its ordering key against every later command of the key. */
export const KEY_HOLDING = `('PENDING', 'RUNNING', 'DEAD')`;

/**
 * A command (of the table `t`, as `outer` names it) that is first of its ordering key: no command
 * of the key with a smaller id is PENDING, RUNNING or DEAD (a dead one holds the key until a person
 * retries, cancels or kills it). Once true it stays true: a command leaves those statuses only for
 * good, and no command of the key gets a smaller id later (keyed inserts take the key's lock
 * before their id, see `insertKeyed`). Read from keyed_idx, so a command without a key pays nothing.
 */
export const firstOfKey = (t: string, outer: string): string =>
  `(${outer}.ordering_key IS NULL OR NOT EXISTS (
     SELECT 1 FROM ${t} AS earlier
     WHERE earlier.ordering_key = ${outer}.ordering_key AND earlier.id < ${outer}.id
       AND earlier.status IN ${KEY_HOLDING}))`;

/**
 * The NOTIFY payload announcing that an admin write took a RUNNING command's claim away (see
 * wakeups.ts, which reads it): `revoked <requeue|kill> <id> <token>`.
 */
export const REVOKED_PAYLOAD = /^revoked (requeue|kill) ([0-9]+) (.+)$/s;

/** The idempotency key is held while a command is unfinished; same text as the unique index's predicate. */
const active = (alias = ''): string =>
  `${alias}status IN (${ACTIVE_STATUSES.map((s) => `'${s}'`).join(', ')})`;

/**
 * Finished rows of `table` older than a cutoff, in a bounded batch: $1 statuses, $2 cutoff, $3
 * limit; with them their edges (as dependant and as dependency: each end is finished or gone) and
 * their workflow steps. Answers `purged`, the commands deleted.
 */
const purgeFrom = (n: TableNames, table: string): string => `
      WITH gone AS (
        DELETE FROM ${table} WHERE finished_at < $2::timestamptz AND id IN (
          SELECT id FROM ${table}
          WHERE status = ANY($1::text[]) AND finished_at < $2::timestamptz
          LIMIT $3
          FOR UPDATE SKIP LOCKED
        )
        RETURNING id
      ), ${purgeLinks(n, 'gone')}
      SELECT count(*)::integer AS purged FROM gone`;

/**
 * CTEs that delete the edges and workflow steps of the commands `ids` (a FROM item with an id
 * column): each through its own index (the edges' dependant index and primary key, the steps'
 * command index).
 */
export const purgeLinks = (n: TableNames, ids: string): string => `
      gone_as_dependant AS (DELETE FROM ${n.dependencies} WHERE dependant_id IN (SELECT id FROM ${ids})),
      gone_as_dependency AS (DELETE FROM ${n.dependencies} WHERE dependency_id IN (SELECT id FROM ${ids})),
      gone_steps AS (DELETE FROM ${n.workflowSteps} WHERE command_id IN (SELECT id FROM ${ids}))`;

export type Sql = ReturnType<typeof buildSql>;

export function buildSql(n: TableNames) {
  const t = n.table;
  const h = n.history;
  const v1 = n.historyV1;
  /**
   * `select` from each table a command may be in: the command table, the history and the history
   * before its partitions (history-partitions.ts). A snapshot sees each command in exactly one.
   */
  const everyTable = (select: (table: string) => string): string =>
    [t, h, v1].map(select).join(' UNION ALL ');
  /** `select` from the history and the history before its partitions. */
  const histories = (select: (table: string) => string): string => [h, v1].map(select).join(' UNION ALL ');
  /** A command's columns from every table. */
  const bothTables = (where: string): string =>
    everyTable((table) => `SELECT ${COLUMNS} FROM ${table} WHERE ${where}`);
  /** What a SUCCESS writes on the row, the same whether it moves or stays. */
  const succeeded = {
    status: `'SUCCESS'`,
    lease_until: 'NULL',
    finished_at: NOW,
    updated_at: NOW,
    last_error: 'NULL',
  };
  /**
   * The refs of `source` (a FROM item aliased `alias`, with id and token columns), each looked up
   * by primary key on its own (a LATERAL subquery with LIMIT is planned per ref, never merged into
   * a join, and names no status, so no partial index of RUNNING rows can serve it), with a column
   * `running`: the text 'RUNNING' if its command is RUNNING under that token, else NULL (never a
   * constant the planner could carry over to the command table), for the fenced writes'
   * `c.status = r.running`. That condition
   * still fences (a row changed meanwhile is checked again against it), but it is a join condition
   * on a column only the refs give: the planner can reach the command table only from them, by
   * primary key or a hash join. Written as `c.status = 'RUNNING'`, it was a condition on the table
   * alone, statistics taken while few commands ran said it left one row, and the planner scanned
   * those rows (through lease_idx, or the table) and compared each with every ref: 0.15–1.1 s for a
   * completion of 500–1,000 refs on a soak (fenced-write-plan.test.ts).
   */
  const fencedRefs = (source: string, alias: string): string =>
    `(SELECT ${alias}.*, running_ref.running FROM ${source} CROSS JOIN LATERAL (
          SELECT CASE WHEN c.status = 'RUNNING' THEN c.status END AS running FROM ${t} AS c
          WHERE c.id = ${alias}.id AND c.claim_token = ${alias}.token LIMIT 1) AS running_ref
        ) AS ${alias}`;
  /** The hung reclaim, `within` narrowing the lapsed leases it reads (see reclaimHung below). */
  const reclaimHung = (within: string): string => `
      WITH hung AS (
        SELECT id FROM ${t}
        WHERE status = 'RUNNING' AND lease_until < ${NOW}${within}
        ORDER BY lease_until, id
        LIMIT $1
        FOR UPDATE SKIP LOCKED
      )
      UPDATE ${t} AS c SET
        rescue_count = c.rescue_count + 1,
        status = CASE WHEN ${pastRescueLimit} THEN 'DEAD' ELSE 'PENDING' END,
        last_error = CASE WHEN ${pastRescueLimit} THEN $3 ELSE c.last_error END,
        finished_at = CASE WHEN ${pastRescueLimit} THEN ${NOW} END,
        history = ${withAttempt(`CASE WHEN ${pastRescueLimit} THEN 'dead' ELSE 'lease_expired' END`, `CASE WHEN ${pastRescueLimit} THEN $3::text END`)},
        claim_token = NULL, lease_until = NULL, updated_at = ${NOW}
      FROM hung WHERE c.id = hung.id AND c.status = 'RUNNING' AND c.lease_until < ${NOW}
      RETURNING c.id, c.type, c.status`;
  /**
   * The move of the RUNNING rows `claims` (a FROM item aliased r, with r.id and r.token) that
   * succeed: deleted from the command table and inserted, finished, into the history, in one
   * statement; `result` the result column's new value. Answers the moved ids. The commonest
   * complete moves only rows without dependants (MOVABLE) and leaves the rest RUNNING for the
   * settling one; `settling` moves those too and settles their dependants in the same statement
   * (settle_succeeded, dependencies.ts), leaving only a schedule's ticks, which `kept` completes in
   * place; `raiseUnlessDone` makes a statement that completed nothing raise CLAIM_LOST.
   */
  const moveSucceeded = (
    claims: string,
    result: string | null,
    {
      kept,
      settling = false,
      raiseUnlessDone = false,
    }: { readonly kept?: string; readonly settling?: boolean; readonly raiseUnlessDone?: boolean } = {},
  ): string => `
      WITH done AS (
        DELETE FROM ${t} AS c USING ${fencedRefs(claims, 'r')}
        WHERE c.id = r.id AND c.status = r.running AND c.claim_token = r.token
          AND ${settling ? 'c.schedule_name IS NULL' : MOVABLE('c')}
        RETURNING c.*${result === null ? '' : `, ${result} AS new_result`}
      ), moved AS (
        ${insertFinished(n, result === null ? succeeded : { ...succeeded, result: 'done.new_result' })}
        RETURNING id
      )${kept === undefined ? '' : `, kept AS (${kept})`}
      SELECT id FROM moved${kept === undefined ? '' : ' UNION ALL SELECT id FROM kept'}${
        raiseUnlessDone
          ? `
      UNION ALL SELECT ${n.fn('claim_lost')}()
        WHERE NOT EXISTS (SELECT 1 FROM moved)${kept === undefined ? '' : ' AND NOT EXISTS (SELECT 1 FROM kept)'}`
          : ''
      }${
        settling
          ? `
      UNION ALL SELECT NULL FROM (SELECT array_agg(id) AS ids FROM done WHERE has_dependants) AS settling
        WHERE settling.ids IS NOT NULL AND ${n.fn('settle_succeeded')}(settling.ids) < 0`
          : ''
      }`;
  const succeededSet = Object.entries(succeeded)
    .map(([column, value]) => `${column} = ${value}`)
    .join(', ');
  /** One attempt in the caller's transaction: $1 id, $2 token, $3 its result's JSON text or null. */
  const oneAttempt = '(SELECT $1::bigint AS id, $2::text AS token, $3::text AS result) AS r';
  /** That attempt's SUCCESS in place, when it is a schedule's tick (its key stays with the row). */
  const oneTickInPlace = `UPDATE ${t} AS c SET ${succeededSet}, result = $3::json
        WHERE c.id = $1 AND c.status = 'RUNNING' AND c.claim_token = $2 AND c.schedule_name IS NOT NULL
        RETURNING c.id`;
  /** The claim's write: RUNNING under a fresh token for `instance`, started and leased on the database clock. */
  const claimSet = (token: string, leaseMs: string, instance: string): string =>
    `status = 'RUNNING', claim_token = ${token}, claimed_by = ${instance}, started_at = ${NOW},
     lease_until = ${lease(leaseMs)}, updated_at = ${NOW}`;
  /** The rescue that a reclaim would add passes the limit ($2), counted since the latest admin retry. */
  const pastRescueLimit = 'c.rescue_count + 1 - c.rescue_count_at_retry > $2';
  const returning = `RETURNING ${COLUMNS.replace(/(\w+)/g, 'c.$1')}`;
  const returningClaim = `RETURNING ${CLAIM_COLUMNS.replace(/(\w+)/g, 'c.$1')}`;
  const returningClaimed = `RETURNING ${CLAIMED_COLUMNS.replace(/(\w+)/g, 'c.$1')}`;
  /**
   * An admin write that may take a claim away (`set`, on the row aliased `c`; $1 id, $2 sources):
   * the row is locked and read first, so when it was RUNNING its old claim is announced with a
   * NOTIFY on $4, the store's channel, which goes out as this statement's transaction commits.
   */
  const revoking = (by: 'requeue' | 'kill', set: string): string => `
      WITH prior AS (SELECT id, status, claim_token FROM ${t} WHERE id = $1::bigint FOR UPDATE),
      moved AS (
        UPDATE ${t} AS c SET ${set}
        FROM prior WHERE c.id = prior.id AND c.status = ANY($2::text[])
        ${returning}, prior.status AS prior_status, prior.claim_token AS prior_token
      )
      SELECT ${COLUMNS},
        CASE WHEN prior_status = 'RUNNING' AND prior_token IS NOT NULL
          THEN pg_notify($4, 'revoked ${by} ' || id || ' ' || prior_token) END AS announced
      FROM moved`;
  /** $1 id, $2 now, $5 types (null: any): the row claimById may take, locked. */
  const claimableById = `
        SELECT id FROM ${t} AS one
        WHERE id = $1::bigint AND status = 'PENDING' AND next_run_at <= $2::timestamptz AND ${NOT_HELD_BACK}
          AND ($5::text[] IS NULL OR type = ANY($5::text[])) AND ${firstOfKey(t, 'one')}
        FOR UPDATE SKIP LOCKED`;
  /**
   * The lock of each distinct ordering key among $9 (for this table), taken in one order so two
   * submitters never wait on each other crosswise, and held to the end of the transaction (of the
   * statement alone in autocommit): ids of a key's commands are drawn after it, so they follow the
   * order in which the submitting transactions commit.
   */
  const keyLocks = (
    keys: string,
  ): string => `SELECT count(pg_advisory_xact_lock(hashtext('${t}'), h)) AS locks
        FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest(${keys}) AS k WHERE k IS NOT NULL ORDER BY h) AS s`;
  /** The idempotent insert's first step, `inserted`: the row, unless the key has an unfinished holder. */
  const insertedUnlessHeld = (
    keyed: boolean,
  ): string => `WITH ${keyed ? `locked AS (${keyLocks('ARRAY[$9::text]')}),` : ''} inserted AS (
        INSERT INTO ${t} (type, biz_key, payload, max_retry, next_run_at, owner, headers, priority, ordering_key,
                          idempotent, created_at, updated_at, flow_key)
        ${keyed ? 'SELECT' : 'VALUES ('} $1::text, $2::text, $3::json, $4::integer, COALESCE($5::timestamptz, ${NOW}),
          $6::text, $7::json, $8::smallint, $9::text, TRUE, ${NOW}, ${NOW}, ${flowKeyOf(n, '$1::text', '$3::json')}
          ${keyed ? 'FROM locked' : ')'}
        ON CONFLICT (type, biz_key) WHERE idempotent AND ${active()} DO NOTHING
        RETURNING id
      )`;
  const idempotentInsert = (keyed: boolean): string => `
      ${insertedUnlessHeld(keyed)}
      SELECT id, FALSE AS duplicate FROM inserted
      UNION ALL
      (SELECT id, TRUE FROM ${t}
        WHERE type = $1 AND biz_key = $2 AND idempotent AND ${active()} AND NOT EXISTS (SELECT 1 FROM inserted)
        LIMIT 1)`;
  /**
   * idempotentInsert that hands a PENDING holder this submit's contents instead: when the insert
   * yields, the UPDATE of the same statement writes the holder if it is still PENDING (a row a
   * claimer is taking meanwhile is waited for and then, RUNNING, left alone); else the holder is
   * only read, as idempotentInsert reads it. $10 the onPending choice: 'replace' also sets the due
   * time, 'replace-keep-run-at' keeps it. Status, counters, ordering key and id stay.
   */
  const replacingIdempotentInsert = (keyed: boolean): string => `
      ${insertedUnlessHeld(keyed)}, replaced AS (
        UPDATE ${t} AS c SET payload = $3::json, max_retry = $4::integer, headers = $7::json,
          priority = $8::smallint, updated_at = ${NOW}, flow_key = ${flowKeyOf(n, 'c.type', '$3::json')},
          next_run_at = CASE WHEN $10::text = 'replace' THEN COALESCE($5::timestamptz, ${NOW}) ELSE c.next_run_at END
        WHERE c.type = $1 AND c.biz_key = $2 AND c.idempotent AND ${active('c.')} AND c.status = 'PENDING'
          AND NOT EXISTS (SELECT 1 FROM inserted)
        RETURNING c.id
      )
      SELECT id, FALSE AS duplicate, FALSE AS replaced FROM inserted
      UNION ALL
      SELECT id, TRUE, TRUE FROM replaced
      UNION ALL
      (SELECT id, TRUE, FALSE FROM ${t}
        WHERE type = $1 AND biz_key = $2 AND idempotent AND ${active()}
          AND NOT EXISTS (SELECT 1 FROM inserted) AND NOT EXISTS (SELECT 1 FROM replaced)
        LIMIT 1)`;
  const batchInsert = (keyed: boolean): string => `
      WITH ${keyed ? `locked AS (${keyLocks('$9::text[]')}),` : ''} input AS (
        SELECT nextval((SELECT pg_get_serial_sequence('${t}', 'id'))::regclass) AS id, u.*
        FROM ${keyed ? 'locked,' : ''} unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::timestamptz[],
                    $6::text[], $7::text[], $8::smallint[], $9::text[])
             WITH ORDINALITY AS u(type, biz_key, payload, max_retry, run_at, owner, headers, priority, ordering_key, ord)
      ), inserted AS (
        INSERT INTO ${t} (id, type, biz_key, payload, max_retry, next_run_at, owner, headers, priority, ordering_key,
                          created_at, updated_at, flow_key)
        SELECT id, type, biz_key, payload::json, max_retry, COALESCE(run_at, ${NOW}), owner, headers::json,
               priority, ordering_key, ${NOW}, ${NOW}, ${flowKeyOf(n, 'input.type', 'input.payload::json')}
        FROM input ORDER BY ord
      )
      SELECT id::text AS id FROM input ORDER BY ord`;
  return {
    /**
     * Batch submit, one statement: the rows arrive as parallel arrays; ids are drawn from the
     * table's sequence in the CTE so they can be handed back in input order.
     * $1 types, $2 biz keys, $3 payloads, $4 max retries, $5 run-at times (null: now), $6 owners,
     * $7 headers, $8 priorities, $9 ordering keys.
     */
    insert: batchInsert(false),

    /**
     * `insert` for a batch holding commands with an ordering key: the key locks first, then the ids
     * (the input's rows are only formed once the lock row exists). Same parameters.
     */
    insertKeyed: batchInsert(true),

    /**
     * One keyed command with scalar parameters (insertOne's), for SqlExecutors, which bind no
     * arrays: the key's lock first, then the id.
     */
    insertOneKeyed: `
      WITH locked AS (${keyLocks('ARRAY[$9::text]')})
      INSERT INTO ${t} (type, biz_key, payload, max_retry, next_run_at, owner, headers, priority, ordering_key,
                        created_at, updated_at, flow_key)
      SELECT $1::text, $2::text, $3::json, $4::integer, COALESCE($5::timestamptz, ${NOW}), $6::text, $7::json,
             $8::smallint, $9::text, ${NOW}, ${NOW}, ${flowKeyOf(n, '$1::text', '$3::json')}
      FROM locked
      RETURNING id::text AS id`,

    /** A single submit, the common case: a plain VALUES row is the cheapest statement to plan. */
    insertOne: `
      INSERT INTO ${t} (type, biz_key, payload, max_retry, next_run_at, owner, headers, priority, ordering_key,
                        created_at, updated_at, flow_key)
      VALUES ($1, $2, $3::json, $4, COALESCE($5::timestamptz, ${NOW}), $6, $7::json, $8::smallint, $9, ${NOW}, ${NOW},
              ${flowKeyOf(n, '$1::text', '$3::json')})
      RETURNING id`,

    /** insertOne with its id taken ahead ($1; see pipeline/id-reserve.ts), held back to the next statement. */
    insertOneWithId: `
      INSERT INTO ${t} (id, type, biz_key, payload, max_retry, next_run_at, owner, headers, priority, ordering_key,
                        created_at, updated_at, flow_key)
      VALUES ($1::bigint, $2, $3, $4::json, $5::integer, COALESCE($6::timestamptz, ${NOW}), $7, $8::json,
              $9::smallint, $10, ${NOW}, ${NOW}, ${flowKeyOf(n, '$2::text', '$4::json')})`,

    /** $1 the table (quoted, qualified), $2 how many: ids of its identity sequence, each its own. */
    takeIds: `SELECT nextval(pg_get_serial_sequence($1, 'id'))::text AS id FROM generate_series(1, $2)`,

    /**
     * Idempotent submit: the partial unique index decides. When the insert yields to an unfinished
     * holder, the holder's id is read in the same statement, unless the holder committed after
     * this statement's snapshot, in which case nothing comes back and the caller asks again.
     * $1 type, $2 biz key, $3 payload, $4 max retry, $5 run-at, $6 owner, $7 headers, $8 priority,
     * $9 ordering key.
     */
    insertIdempotent: idempotentInsert(false),
    /** insertIdempotent of a command with an ordering key: the key's lock first (see insertKeyed). */
    insertIdempotentKeyed: idempotentInsert(true),
    /**
     * insertIdempotent with onPending 'replace' or 'replace-keep-run-at' ($10): a PENDING holder
     * takes the contents instead. Same parameters as insertIdempotent, then $10; answers `replaced`.
     */
    insertIdempotentReplacing: replacingIdempotentInsert(false),
    insertIdempotentReplacingKeyed: replacingIdempotentInsert(true),

    /**
     * The claim, one statement in READ COMMITTED. The CTE picks at most $limit due ids in claim
     * order (priority, due time, id) from the partial claim index, skipping rows other claimers hold (claim-plan.ts: a plan that does not
     * depend on table statistics); the UPDATE then touches only those.
     * $1 now, $2 types, $3 limit, $4 token, $5 lease ms, $6 instance. Its rows hold CLAIMED_COLUMNS.
     */
    claimDue: `
      WITH due AS (SELECT id FROM ${dueIdsFunction(n)}($1::timestamptz, $2::text[], $3::integer) AS id)
      UPDATE ${t} AS c SET ${claimSet('$4', '$5', '$6')}
      FROM due WHERE c.id = due.id
      ${returningClaimed}`,

    /**
     * claimDue starting at a position of the claim order instead of its head (core store-kit head-skip.ts):
     * $7 priority, $8 due time, $9 id of the position; the rest as claimDue.
     */
    claimDueFrom: `
      WITH due AS (
        SELECT id FROM ${dueIdsFromFunction(n)}($1::timestamptz, $2::text[], $3::integer,
                                                  $7::smallint, $8::timestamptz, $9::bigint) AS id)
      UPDATE ${t} AS c SET ${claimSet('$4', '$5', '$6')}
      FROM due WHERE c.id = due.id
      ${returningClaimed}`,

    /** The keys of keyed types' commands: their declaration and the keyed claims' reads (flow-keys.ts). */
    flow: flowKeySql(n),
    /** The statements of the per-key rate limits (key-rate-limits.ts). */
    keyRate: keyRateLimitSql(n, claimSet('$2', '$3', '$4'), returningClaimed),

    /** $1 id, $2 now, $3 token, $4 lease ms, $5 types (null: any), $6 instance. */
    claimById: `
      WITH one AS (${claimableById})
      UPDATE ${t} AS c SET ${claimSet('$3', '$4', '$6')}
      FROM one WHERE c.id = one.id
      ${returningClaim}`,

    /**
     * claimById as it runs right after a store transaction's COMMIT, on that transaction's durable
     * connection (pipeline/commit-riders.ts): the same claim, committed like the other hot-path writes,
     * without waiting for the WAL flush (set_config(…, true) lasts for this statement's transaction).
     */
    claimByIdAfterCommit: `
      WITH fast AS (SELECT set_config('synchronous_commit', 'off', true)),
        one AS (${claimableById})
      UPDATE ${t} AS c SET ${claimSet('$3', '$4', '$6')}
      FROM one, fast WHERE c.id = one.id
      ${returningClaim}`,

    /** Progress reports, one per claim: $1 ids, $2 tokens, $3 done, $4 total (parallel arrays). */
    reportProgress: `
      UPDATE ${t} AS c SET progress_done = r.done, progress_total = r.total, updated_at = ${NOW}
      FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[]) AS r(id, token, done, total)
      WHERE c.id = r.id AND c.status = 'RUNNING' AND c.claim_token = r.token
      RETURNING c.id`,

    /**
     * Fenced batch writes: $1 ids, $2 tokens (parallel arrays).
     *
     * The heartbeat answers which claims are still held (read, not locked) and renews the leases of
     * those no other statement has locked. It never waits: a claim whose outcome is being written
     * meanwhile is done with its lease, and a heartbeat that waited for that write while the write
     * waited for a row the heartbeat had locked was a deadlock, found only after deadlock_timeout.
     * A claim whose row was locked is renewed by the next heartbeat, well before its lease ends.
     */
    heartbeat: `
      WITH held AS (
        SELECT r.id, r.token, r.running FROM ${fencedRefs('unnest($1::bigint[], $2::text[]) AS r(id, token)', 'r')}
        WHERE r.running IS NOT NULL
      ), free AS (
        SELECT r.id FROM held AS r CROSS JOIN LATERAL (
          SELECT 1 FROM ${t} AS c WHERE c.id = r.id AND c.status = r.running AND c.claim_token = r.token
          LIMIT 1 FOR UPDATE OF c SKIP LOCKED) AS unlocked
      ), renewed AS (
        UPDATE ${t} AS c SET lease_until = ${lease('$3')}, updated_at = ${NOW}
        FROM free WHERE c.id = free.id
      )
      SELECT id, token AS claim_token FROM held`,

    /**
     * Done: an earlier attempt's error stays in the attempt history, not in last_error. The
     * succeeded attempt is the row itself (started_at, finished_at, claimed_by; see core
     * attemptHistory), so the hot path's commonest write appends nothing. The row moves to the
     * history table (history.ts); the claim token goes with it (the record shows it only while
     * RUNNING), so a retried complete can tell its own success (completedBefore).
     * $1 ids, $2 tokens (parallel arrays): the ids moved.
     */
    complete: moveSucceeded('unnest($1::bigint[], $2::text[]) AS r(id, token)', null),

    /**
     * complete of attempts some of which left a result: $3 the results' JSON text, parallel to the
     * refs (null: none). Written by the completion itself, so a fenced attempt's result goes with
     * it, and a retried complete whose first try landed (the row SUCCESS already) leaves it as it is.
     */
    completeWithResults: moveSucceeded(
      'unnest($1::bigint[], $2::text[], $3::text[]) AS r(id, token, result)',
      'r.result::json',
    ),

    /**
     * complete of the rows the commonest complete left (history.ts MOVABLE): moved with their
     * dependants settled, a schedule's tick updated in place (its trigger settles what depends on
     * it). $1 ids, $2 tokens, $3 results' JSON text (null: none).
     */
    completeSettling: moveSucceeded(
      'unnest($1::bigint[], $2::text[], $3::text[]) AS r(id, token, result)',
      'r.result::json',
      {
        kept: `UPDATE ${t} AS c SET ${succeededSet}, result = r.result::json
        FROM unnest($1::bigint[], $2::text[], $3::text[]) AS r(id, token, result)
        WHERE c.id = r.id AND c.status = 'RUNNING' AND c.claim_token = r.token AND c.schedule_name IS NOT NULL
        RETURNING c.id`,
        settling: true,
      },
    ),

    /**
     * One attempt's SUCCESS in the caller's transaction (transactionalCompletion), its result ($3,
     * JSON text or null) with it: moved when it has no dependants and is no schedule's tick (the
     * commonest case, one statement). No row back: it is one of those, or the claim was taken away.
     */
    completeInTransaction: moveSucceeded(oneAttempt, 'r.result::json'),

    /**
     * The same attempt's SUCCESS when the statement above left its row: moved with its dependants
     * settled, or updated in place when it is a schedule's tick. No row back: the claim was taken away.
     */
    completeInTransactionSettling: moveSucceeded(oneAttempt, 'r.result::json', {
      kept: oneTickInPlace,
      settling: true,
    }),

    /**
     * The same attempt's SUCCESS as one statement for every case, sent with the transaction's
     * COMMIT (transactionalCompletion.completeAtCommit): when the claim was taken away it raises
     * CLAIM_LOST (migration 22), so the transaction fails and nothing of it commits.
     */
    completeAtCommit: moveSucceeded(oneAttempt, 'r.result::json', {
      kept: oneTickInPlace,
      settling: true,
      raiseUnlessDone: true,
    }),

    /** Whether one claim's command is SUCCESS under it (the claim token stays on the row). */
    succeededUnder: everyTable(
      (table) => `SELECT 1 AS held FROM ${table} WHERE id = $1 AND status = 'SUCCESS' AND claim_token = $2`,
    ),

    /** Of these refs, those already SUCCESS under the same claim: an earlier try of the complete landed. */
    completedBefore: everyTable(
      (table) => `
      SELECT c.id FROM ${table} AS c JOIN unnest($1::bigint[], $2::text[]) AS r(id, token)
        ON c.id = r.id AND c.claim_token = r.token
      WHERE c.status = 'SUCCESS'`,
    ),

    release: `
      UPDATE ${t} AS c SET status = 'PENDING', claim_token = NULL, lease_until = NULL, updated_at = ${NOW}
      FROM ${fencedRefs('unnest($1::bigint[], $2::text[]) AS r(id, token)', 'r')}
      WHERE c.id = r.id AND c.status = r.running AND c.claim_token = r.token
      RETURNING c.id`,

    /** A requeued command's old claim lets go: claimable at once. */
    releaseRevoked: `
      UPDATE ${t} AS c SET claim_token = NULL, lease_until = NULL, updated_at = ${NOW}
      FROM unnest($1::bigint[], $2::text[]) AS r(id, token)
      WHERE c.id = r.id AND c.status = 'PENDING' AND c.claim_token = r.token
      RETURNING c.id`,

    /**
     * Failed attempts' outcomes: unnest of ids, tokens, statuses, retry counts, next run times,
     * errors. The claim token stays on the row, as after complete (see failedBefore); the lease goes,
     * so the row is claimable when due.
     */
    fail: `
      UPDATE ${t} AS c SET status = f.status, retry_count = f.retry_count, next_run_at = f.next_run_at,
        last_error = f.last_error, lease_until = NULL,
        finished_at = CASE WHEN f.status = 'DEAD' THEN ${NOW} END, updated_at = ${NOW},
        history = ${withAttempt(`CASE WHEN f.status = 'DEAD' THEN 'dead' ELSE 'failed' END`, 'f.last_error')}
      FROM ${fencedRefs(
        `unnest($1::bigint[], $2::text[], $3::text[], $4::integer[], $5::timestamptz[], $6::text[])
          AS f(id, token, status, retry_count, next_run_at, last_error)`,
        'f',
      )}
      WHERE c.id = f.id AND c.status = f.running AND c.claim_token = f.token
      RETURNING c.id`,

    /** Of these attempts (ids, tokens, statuses, retry counts), those whose outcome is already on the row under the same claim. */
    failedBefore: `
      SELECT c.id FROM ${t} AS c
        JOIN unnest($1::bigint[], $2::text[], $3::text[], $4::integer[]) AS f(id, token, status, retry_count)
        ON c.id = f.id AND c.claim_token = f.token AND c.status = f.status AND c.retry_count = f.retry_count`,

    /**
     * Hung reclaim on the database clock, in a bounded batch: back to PENDING keeping its due time
     * (an orphan keeps its place in the queue), or DEAD once the rescue count would pass $2 (with $3
     * as the reason). The UPDATE repeats the status and lease guard, so a row that completed or
     * heartbeat meanwhile is left alone. $1 limit.
     */
    reclaimHung: reclaimHung(''),
    /** reclaimHung of the leases that lapsed within $4 ms of now only (core store-kit head-skip.ts, ReclaimWindow). */
    reclaimHungWithin: reclaimHung(` AND lease_until >= ${NOW} - $4::float8 * interval '1 millisecond'`),

    /**
     * Admin transitions: one guarded UPDATE each; $1 id, $2 allowed source statuses. A retry keeps
     * the counts and starts the retry budget and rescue limit from them.
     */
    retry: `
      UPDATE ${t} AS c SET status = 'PENDING', retry_count_at_retry = c.retry_count,
        rescue_count_at_retry = c.rescue_count, next_run_at = $3::timestamptz,
        claim_token = NULL, lease_until = NULL, finished_at = NULL, updated_at = ${NOW}
      WHERE id = $1::bigint AND status = ANY($2::text[])
      ${returning}`,
    /**
     * $3 now, $4 the channel. The old claim's token and lease stay on the row: they hold the
     * command back (NOT_HELD_BACK) while the old executor may still run.
     */
    requeue: revoking(
      'requeue',
      `status = 'PENDING', next_run_at = $3::timestamptz, updated_at = ${NOW},
        history = ${withAttempt(`'requeued'`, 'NULL::text')}`,
    ),
    /** kill and cancel: $3 reason (null keeps the last error), $4 the channel; a running attempt ends `killed`. */
    dispose: revoking(
      'kill',
      `status = 'CANCELLED', last_error = COALESCE($3::text, c.last_error), claim_token = NULL,
        lease_until = NULL, finished_at = ${NOW}, updated_at = ${NOW},
        history = CASE WHEN c.status = 'RUNNING' THEN ${withAttempt(`'killed'`, '$3::text')} ELSE c.history END`,
    ),
    /** Who holds the idempotency key a retried command needs; $1 the retried id. */
    keyHolder: `
      SELECT h.id FROM ${t} AS h JOIN ${t} AS me ON h.type = me.type AND h.biz_key = me.biz_key
      WHERE me.id = $1::bigint AND h.id <> me.id AND h.idempotent AND ${active('h.')}
      LIMIT 1`,
    activeKeyIndex: n.index('active_key').replace(/"/g, ''),

    statusOf: everyTable((table) => `SELECT status FROM ${table} WHERE id = $1::bigint`),
    get: bothTables('id = $1::bigint'),
    getMany: bothTables('id = ANY($1::bigint[])'),
    /**
     * Newest first by creation time, the id breaking ties (ids are taken in blocks per process, so
     * their order is not the submission order). $1 statuses (null: any), $2 type, $3 biz key,
     * $4 and $5 the cursor's creation time and id (rows below it), $6 limit.
     */
    list: (() => {
      const page = (table: string, more = ''): string => `(
        SELECT ${COLUMNS} FROM ${table}
        WHERE ($1::text[] IS NULL OR status = ANY($1::text[]))${more}
          AND ($2::text IS NULL OR type = $2)
          AND ($3::text IS NULL OR biz_key = $3)
          AND ($4::timestamptz IS NULL OR (created_at <= $4::timestamptz
            AND (created_at, id) < ($4::timestamptz, $5::bigint)))
        ORDER BY created_at DESC, id DESC
        LIMIT $6)`;
      // Each table's page from its own index, then the newest of both. The history holds SUCCESS
      // only: a list of other statuses never reads it (a condition on parameters alone, decided
      // once per execution, before any scan).
      const successOnly = ` AND ($1::text[] IS NULL OR 'SUCCESS' = ANY($1::text[]))`;
      return `SELECT * FROM (${page(t)} UNION ALL ${histories((table) => page(table, successOnly))}) AS both_tables
        ORDER BY created_at DESC, id DESC
        LIMIT $6`;
    })(),
    counts: `
      SELECT status, type, sum(count)::bigint AS count FROM (
        ${everyTable((table) => `SELECT status, type, count(*) AS count FROM ${table} GROUP BY status, type`)}) AS both_tables
      GROUP BY status, type ORDER BY status, type`,
    oldestDue: `SELECT min(next_run_at) AS oldest FROM ${t} WHERE status = 'PENDING' AND next_run_at <= $1::timestamptz`,
    /**
     * $1 now, $2 how many dead letters to count at most. Both from partial indexes (dead_idx,
     * due_idx), so the probe reads at most $2 + 1 index entries however big the table is.
     */
    healthProbe: `
      SELECT (SELECT count(*) FROM (SELECT 1 FROM ${t} WHERE status = 'DEAD' LIMIT $2) AS dead) AS dead_letters,
             (SELECT min(next_run_at) FROM ${t}
              WHERE status = 'PENDING' AND next_run_at <= $1::timestamptz) AS oldest`,
    /**
     * $1 from, $2 to, $3 ascending latency bounds in ms: outcomes finished in [$1, $2) by status and
     * latency bucket (width_bucket counts the bounds ≤ the latency), from outcome_idx.
     */
    outcomeCounts: `
      SELECT status,
             width_bucket(extract(epoch FROM finished_at - created_at) * 1000, $3::numeric[]) AS latency_bucket,
             count(*) AS count
      FROM (
        ${everyTable(
          (table) => `SELECT status, created_at, finished_at FROM ${table}
        WHERE status IN ('SUCCESS', 'DEAD') AND finished_at >= $1::timestamptz AND finished_at < $2::timestamptz`,
        )}
      ) AS both_tables
      GROUP BY 1, 2
      ORDER BY 1, 2`,
    /** $1 statuses, $2 cutoff, $3 limit: the history's rows (the store purges them first). */
    purgeHistory: purgeFrom(n, h),
    /** $1 statuses, $2 cutoff, $3 limit: the rows of the history before its partitions. */
    purgeHistoryV1: purgeFrom(n, v1),
    /** $1 statuses, $2 cutoff, $3 limit: the command table's. */
    purge: purgeFrom(n, t),
    /** $1 type, $2 reason: a row unless the type has one (rowCount 1: paused by this call). */
    typePause: `INSERT INTO ${n.pausedTypes} (type, paused_at, reason) VALUES ($1::text, ${NOW}, $2::text)
      ON CONFLICT (type) DO NOTHING`,
    typeResume: `DELETE FROM ${n.pausedTypes} WHERE type = $1::text`,
    typePauseList: `SELECT type, paused_at, reason FROM ${n.pausedTypes} ORDER BY type`,
    now: `SELECT ${NOW} AS now`,
    ping: `SELECT 1`,
    notify: `SELECT pg_notify($1, '')`,
  };
}
