import { ATTEMPT_HISTORY_LENGTH } from '@asynccmd/core/store-kit';
import { flowKeySql } from './flow-keys.js';
import { copyFinished, MOVABLE } from './history.js';
import { keyRateLimitSql } from './key-limits.js';

/**
 * Every statement of the SQLite store, built once per (validated) table name. Values are always
 * bound parameters; lists arrive as one JSON text parameter read with json_each, so a statement's
 * text never depends on how many ids or types it is given.
 *
 * Times are epoch milliseconds. DB_NOW is the database clock; leases and updated_at use it, due
 * checks use the application clock passed in as a parameter (see the store port).
 */
export const DB_NOW = `CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)`;

/**
 * The row as the store reads it back: the id as decimal text, everything else as stored. Beware:
 * the `id` alias is text, so ORDER BY and comparisons must name the column as `<table>.id`.
 */
const COLUMNS = `CAST(id AS TEXT) AS id, type, biz_key, payload, status, max_retry, retry_count,
  rescue_count, next_run_at, last_error, owner, claim_token, lease_until, idempotent, headers,
  created_at, updated_at, started_at, finished_at, retry_count_at_retry, rescue_count_at_retry,
  claimed_by, history, priority, ordering_key, result, progress_done, progress_total`;

/**
 * The row as the claims return it, in raw mode: COLUMNS but the payload as one JSON array, in
 * COLUMNS' order (rows.ts toRecordFromClaim reads it by position: keep the two in step), then the
 * payload. better-sqlite3 sets each value of a raw row with a generic property write (on Node
 * before 22), which costs more than most values themselves; one text of two dozen values read with
 * JSON.parse costs a fraction of that. Integers come back exactly: ids as text, the others far below
 * 2^53. Left out: what the claim itself wrote into every row it returns (status, claim_token,
 * claimed_by), known to the caller already. Last, has_dependants: not part of the record, the
 * store's own (a completion of such a command may release work here: store.ts claimedWithDependants).
 */
const CLAIMED_COLUMNS = `json_array(CAST(id AS TEXT), type, biz_key, max_retry, retry_count,
  rescue_count, next_run_at, last_error, owner, lease_until, idempotent, headers,
  created_at, updated_at, started_at, finished_at, retry_count_at_retry, rescue_count_at_retry,
  history, priority, ordering_key, has_dependants), payload`;

/**
 * The row's history with the attempt its claim ran appended, ending now with `outcome` and `error`
 * (SQL expressions), and only the latest ATTEMPT_HISTORY_LENGTH kept: the array never holds more,
 * so dropping its first is enough. Written in the same UPDATE as the outcome (SQLite's SET reads
 * the row as it was), so it costs no statement of its own.
 */
const withAttempt = (t: string, outcome: string, error: string): string =>
  `json_insert(CASE WHEN json_array_length(${t}.history) >= ${ATTEMPT_HISTORY_LENGTH}
                    THEN json_remove(${t}.history, '$[0]') ELSE ${t}.history END,
     '$[#]', json_object('startedAt', ${t}.started_at, 'finishedAt', ${DB_NOW}, 'instance', ${t}.claimed_by,
                         'outcome', ${outcome}, 'error', ${error}))`;

/**
 * A PENDING row no requeued claim holds back: a requeue keeps the old claim's token and lease on
 * the row until that claim lets go (releaseRevoked) or the lease runs out, its executor may still run.
 */
const NOT_HELD_BACK = `(lease_until IS NULL OR lease_until < ${DB_NOW})`;

/**
 * The places a type's stored limit leaves free: the limit less its RUNNING commands (read from the
 * partial lease index), 0 without a stored limit; may be negative once a limit was lowered.
 */
const freePlaces = (t: string, type: string): string =>
  `(COALESCE((SELECT max_running FROM ${t}_type_limits WHERE type = ${type}), 0)
    - (SELECT count(*) FROM ${t} AS running INDEXED BY ${t}_lease WHERE status = 'RUNNING' AND type = ${type}))`;

/** The rescue a reclaim would add passes the limit, counted since the latest admin retry. */
const PAST_RESCUE_LIMIT = 'rescue_count + 1 - rescue_count_at_retry > :maxRescues';

/** Statuses in which a command holds its ordering key against every later command of the key. */
const KEY_HOLDING = `('PENDING', 'RUNNING', 'DEAD')`;

/**
 * A command (as `outer` names it) that is first of its ordering key: no command of the key with a
 * smaller id is PENDING, RUNNING or DEAD (a dead one holds the key until a person retries, cancels
 * or kills it). Read from the keyed index, so a command without a key pays nothing. SQLite has one
 * writer at a time, so the ids of a key's commands follow the order their transactions commit in.
 */
const firstOfKey = (t: string, outer: string): string =>
  `(${outer}.ordering_key IS NULL OR NOT EXISTS (
     SELECT 1 FROM ${t} AS earlier INDEXED BY ${t}_keyed
     WHERE earlier.ordering_key = ${outer}.ordering_key AND earlier.id < ${outer}.id
       AND earlier.status IN ${KEY_HOLDING}))`;

/**
 * One inserted row: type, biz_key, payload, max_retry, run_at (null: now), owner, headers, priority,
 * ordering_key.
 */
const INSERT_ROW = `(?, ?, ?, 'PENDING', ?, COALESCE(?, ${DB_NOW}), ?, 0, ?, ?, ?, ${DB_NOW}, ${DB_NOW})`;

/**
 * JSON text `{"token": [id, …], …}` (the refs grouped by claim) matched against (id, claim_token):
 * each id is read as a plain number, where a list of `[id, "token"]` pairs would parse each pair
 * again for each of its two values.
 */
const REFS = `(id, claim_token) IN (
         SELECT ids.value, claim.key FROM json_each(:refs) AS claim, json_each(claim.value) AS ids)`;

/** The due rows of :type a claim may take, in claim order, from the claim index (led by type). */
const dueOfType = (
  t: string,
  columns = 'id',
): string => `SELECT ${columns} FROM ${t} AS due INDEXED BY ${t}_claim_type
         WHERE type = :type AND status = 'PENDING' AND next_run_at <= :now
           AND ${NOT_HELD_BACK} AND ${firstOfKey(t, 'due')}
         ORDER BY priority, next_run_at, id`;

/** The due claim of the PENDING rows of :type, at most `limit` (an expression). */
const claimDue = (t: string, limit: string): string => `UPDATE ${t} NOT INDEXED
       SET status = 'RUNNING', claim_token = :token, claimed_by = :instance, lease_until = ${DB_NOW} + :leaseMs,
           started_at = ${DB_NOW}, updated_at = ${DB_NOW}
       WHERE status = 'PENDING' AND id IN (
         ${dueOfType(t)}
         LIMIT ${limit})
       RETURNING ${CLAIMED_COLUMNS}`;

/**
 * The claim of the rows `which` names (by id), each held to claimDue's conditions and `more`. The
 * unary `+` keeps SQLite from reaching the rows through a status or due-time index instead of by
 * their ids (with a list of ids it would, and filter every PENDING row).
 */
const claimWhere = (t: string, which: string, more: string): string => `UPDATE ${t}
       SET status = 'RUNNING', claim_token = :token, claimed_by = :instance, lease_until = ${DB_NOW} + :leaseMs,
           started_at = ${DB_NOW}, updated_at = ${DB_NOW}
       WHERE ${which} AND +status = 'PENDING' AND +next_run_at <= :now AND ${NOT_HELD_BACK}
         AND ${firstOfKey(t, t)}${more}
       RETURNING ${CLAIMED_COLUMNS}`;

/** The claim of one row by id, of :types (null: any); `more` is what it must also meet. */
const claimById = (t: string, more: string): string =>
  claimWhere(t, 'id = :id AND (:types IS NULL OR type IN (SELECT value FROM json_each(:types)))', more);

/** A bounded batch of the finished rows of `table` older than :olderThan, through its finished_at index. */
const purge = (table: string, index: string): string => `DELETE FROM ${table} WHERE id IN (
         SELECT id FROM ${table} INDEXED BY ${index}
         WHERE finished_at < :olderThan AND status IN (SELECT value FROM json_each(:statuses))
         ORDER BY finished_at, id
         LIMIT :limit)
       RETURNING id`;

/** The results of completed attempts onto the SUCCESS rows of `table` (see storeResults). */
const storeResults = (table: string): string => `UPDATE ${table} NOT INDEXED SET result = r.result
       FROM (SELECT value ->> 0 AS id, value ->> 1 AS token, value ->> 2 AS result FROM json_each(:results)) AS r
       WHERE ${table}.id = r.id AND ${table}.status = 'SUCCESS' AND ${table}.claim_token = r.token
         AND ${table}.result IS NULL`;

/** What a SUCCESS writes on the row, the same whether it moves or stays. */
const SUCCEEDED: Readonly<Record<string, string>> = {
  status: `'SUCCESS'`,
  lease_until: 'NULL',
  finished_at: DB_NOW,
  updated_at: DB_NOW,
  last_error: 'NULL',
};
const SUCCEEDED_SET = Object.entries(SUCCEEDED)
  .map(([column, value]) => `${column} = ${value}`)
  .join(', ');

/**
 * The hot paths name their index (INDEXED BY): without ANALYZE statistics the planner prefers the
 * (status, id) index and sorts every due row on each claim, which gets slower as the backlog grows.
 * The writes that pick rows by id say NOT INDEXED (rowid lookups stay allowed): otherwise the
 * planner walks every row of the status they check (every pending row on a claim, every running
 * one on an outcome write) and tests each against the id list.
 */
export function sqliteSql(t: string) {
  return {
    now: `SELECT ${DB_NOW} AS now`,
    ping: `SELECT 1`,

    /** `rows` commands in one statement; ids come back in insertion order once sorted. */
    insertMany: (rows: number) =>
      `INSERT INTO ${t} (type, biz_key, payload, status, max_retry, next_run_at, owner, idempotent,
         headers, priority, ordering_key, created_at, updated_at)
       VALUES ${Array.from({ length: rows }, () => INSERT_ROW).join(', ')}
       RETURNING CAST(id AS TEXT) AS id`,

    /** Does nothing when the active-key partial unique index already holds (type, biz_key). */
    insertIdempotent: `INSERT INTO ${t} (type, biz_key, payload, status, max_retry, next_run_at, owner,
         idempotent, headers, priority, ordering_key, created_at, updated_at)
       VALUES (?, ?, ?, 'PENDING', ?, COALESCE(?, ${DB_NOW}), ?, 1, ?, ?, ?, ${DB_NOW}, ${DB_NOW})
       ON CONFLICT (type, biz_key) WHERE idempotent = 1 AND status IN ('PENDING', 'RUNNING') DO NOTHING
       RETURNING CAST(id AS TEXT) AS id`,
    activeHolder: `SELECT CAST(id AS TEXT) AS id FROM ${t}
       WHERE type = ? AND biz_key = ? AND idempotent = 1 AND status IN ('PENDING', 'RUNNING')`,
    /**
     * A replacing idempotent submit's first statement: the PENDING holder of (type, biz_key), if
     * any, takes the submit's contents (and, `withRunAt`, its due time: null is now). Its write
     * lock is held to the end of the transaction, so the insert or look-up that follows when
     * nothing matched sees the same table. Parameters: payload, max_retry, headers, priority,
     * (run_at,) type, biz_key.
     */
    replacePending: (withRunAt: boolean) =>
      `UPDATE ${t} SET payload = ?, max_retry = ?, headers = ?, priority = ?,${
        withRunAt ? ` next_run_at = COALESCE(?, ${DB_NOW}),` : ''
      } updated_at = ${DB_NOW}
       WHERE type = ? AND biz_key = ? AND idempotent = 1 AND status IN ('PENDING', 'RUNNING')
         AND status = 'PENDING'
       RETURNING CAST(id AS TEXT) AS id`,

    /**
     * The claim of one type (:type), in claim order (priority, due time, id); one statement, and
     * SQLite has a single writer, so no row is claimed twice.
     */
    claimDue: claimDue(t, ':limit'),
    /**
     * The first :limit rows a claim of :type may take, in claim order, with their place in it: a
     * claim of several types merges each type's and takes the first of all (store.ts).
     */
    claimCandidates: `${dueOfType(t, 'id, priority, next_run_at')} LIMIT :limit`,
    claimById: claimById(t, ''),
    /**
     * claimDue of one limited type (:type) within its stored limit: at most the limit less its
     * RUNNING commands, none without a stored limit. One statement under SQLite's single writer, so
     * no other claim can run between the count and the write.
     */
    claimDueLimited: claimDue(t, `MIN(:limit, MAX(0, ${freePlaces(t, ':type')}))`),
    /**
     * The claim of the ids a keyed or keyed-rate claim picked (:ids, a JSON array), each reached by
     * its primary key and held to claimDue's conditions — not by walking the claim index up to the
     * last of them, which lies behind a big tenant's whole backlog when fair share picks a small one.
     */
    claimDuePicked: claimWhere(t, 'id IN (SELECT value FROM json_each(:ids))', ''),
    ...flowKeySql(t, `${NOT_HELD_BACK} AND ${firstOfKey(t, 'due')}`),
    ...keyRateLimitSql(t),
    keyLimitDeclare: `INSERT INTO ${t}_key_limits (type, key_field, max_running, key_weights) VALUES (?, ?, ?, ?)
       ON CONFLICT (type) DO UPDATE SET key_field = excluded.key_field, max_running = excluded.max_running,
         key_weights = excluded.key_weights`,
    keyLimitOf: `SELECT key_field AS keyField, max_running AS maxRunning, key_weights AS weightsJson
      FROM ${t}_key_limits WHERE type = ?`,
    keyLimitList: `SELECT type, key_field AS keyField, max_running AS maxRunning, key_weights AS weightsJson
      FROM ${t}_key_limits ORDER BY type`,
    /** claimById, where a command of one of :limited types is claimed only within its stored limit. */
    claimByIdLimited: claimById(
      t,
      `
         AND (type NOT IN (SELECT value FROM json_each(:limited)) OR ${freePlaces(t, `${t}.type`)} > 0)`,
    ),
    typeLimitDeclare: `INSERT INTO ${t}_type_limits (type, max_running) VALUES (?, ?)
       ON CONFLICT (type) DO UPDATE SET max_running = excluded.max_running`,
    typeLimitList: `SELECT type, max_running AS maxRunning FROM ${t}_type_limits ORDER BY type`,
    typePause: `INSERT INTO ${t}_paused_types (type, paused_at, reason) VALUES (?, ${DB_NOW}, ?)
       ON CONFLICT (type) DO NOTHING`,
    typeResume: `DELETE FROM ${t}_paused_types WHERE type = ?`,
    typePauseList: `SELECT type, paused_at AS pausedAt, reason FROM ${t}_paused_types ORDER BY type`,

    // Outcome writes: fenced by status and claim token, so a stale executor changes nothing.
    heartbeat: `UPDATE ${t} NOT INDEXED SET lease_until = ${DB_NOW} + :leaseMs, updated_at = ${DB_NOW}
       WHERE status = 'RUNNING' AND ${REFS}
       RETURNING CAST(id AS TEXT) AS id, claim_token AS token`,
    /** :reports is a JSON array of [id, token, done, total], one per claim. */
    reportProgress: `UPDATE ${t} NOT INDEXED SET progress_done = r.done, progress_total = r.total,
         updated_at = ${DB_NOW}
       FROM (SELECT value ->> 0 AS id, value ->> 1 AS token, value ->> 2 AS done, value ->> 3 AS total
             FROM json_each(:reports)) AS r
       WHERE ${t}.id = r.id AND ${t}.status = 'RUNNING' AND ${t}.claim_token = r.token
       RETURNING CAST(${t}.id AS TEXT) AS id`,
    /**
     * Done: an earlier attempt's error stays in the attempt history, not in last_error. The
     * succeeded attempt is the row itself (see core attemptHistory): the commonest write appends
     * nothing. A movable row (history.ts) is copied, finished, into the history (moveSucceeded),
     * then deleted here (dropMoved), in the completion's transaction; the others are updated in
     * place (complete). The claim token goes with the row (the record shows it only while RUNNING):
     * see completedBefore. They return nothing: the store counts their changes.
     */
    moveSucceeded: copyFinished(t, `status = 'RUNNING' AND ${REFS} AND ${MOVABLE}`, SUCCEEDED),
    dropMoved: `DELETE FROM ${t} NOT INDEXED WHERE status = 'RUNNING' AND ${REFS} AND ${MOVABLE}`,
    complete: `UPDATE ${t} NOT INDEXED
       SET ${SUCCEEDED_SET}
       WHERE status = 'RUNNING' AND ${REFS}`,
    /**
     * The results of attempts this complete recorded, :results a JSON array of [id, token, result]:
     * only on rows SUCCESS under that claim (a fenced attempt's result is dropped with it) that have
     * none yet (a retried complete whose first try landed keeps the first one's, as elsewhere), in
     * the history and in the command table.
     */
    storeResults: storeResults(`${t}_history`),
    storeResultsInPlace: storeResults(t),
    /**
     * Of these refs, those SUCCESS under the same claim: completed by this complete or an earlier
     * one of the same claim (its outcome recorded, not fenced).
     */
    completedBefore: `SELECT CAST(id AS TEXT) AS id FROM ${t}_history NOT INDEXED
       WHERE status = 'SUCCESS' AND ${REFS}
       UNION ALL
       SELECT CAST(id AS TEXT) AS id FROM ${t} NOT INDEXED
       WHERE status = 'SUCCESS' AND ${REFS}`,
    /**
     * One attempt's SUCCESS in the caller's transaction (transactionalCompletion), its result with
     * it: moved (moveOne, dropOne) or, for a row that stays, in place; the store counts the
     * changes: none means the claim was taken away.
     */
    moveOne: copyFinished(t, `id = :id AND status = 'RUNNING' AND claim_token = :token AND ${MOVABLE}`, {
      ...SUCCEEDED,
      result: ':result',
    }),
    dropOne: `DELETE FROM ${t} WHERE id = :id AND status = 'RUNNING' AND claim_token = :token AND ${MOVABLE}`,
    completeInTransaction: `UPDATE ${t}
       SET ${SUCCEEDED_SET}, result = :result
       WHERE id = :id AND status = 'RUNNING' AND claim_token = :token`,
    /** Whether one claim's command is SUCCESS under it (the claim token stays on the row). */
    succeededUnder: `SELECT 1 FROM ${t}_history WHERE id = :id AND status = 'SUCCESS' AND claim_token = :token
       UNION ALL
       SELECT 1 FROM ${t} WHERE id = :id AND status = 'SUCCESS' AND claim_token = :token`,
    /** :attempts is a JSON array of [id, token, status, retryCount, nextRunAt, lastError]. */
    fail: `UPDATE ${t} NOT INDEXED
       SET status = f.status, retry_count = f.retry_count, next_run_at = f.next_run_at,
           last_error = f.last_error, lease_until = NULL, updated_at = ${DB_NOW},
           finished_at = CASE WHEN f.status = 'DEAD' THEN ${DB_NOW} ELSE NULL END,
           history = ${withAttempt(t, `CASE WHEN f.status = 'DEAD' THEN 'dead' ELSE 'failed' END`, 'f.last_error')}
       FROM (SELECT value ->> 0 AS id, value ->> 1 AS token, value ->> 2 AS status,
                    value ->> 3 AS retry_count, value ->> 4 AS next_run_at, value ->> 5 AS last_error
             FROM json_each(:attempts)) AS f
       WHERE ${t}.id = f.id AND ${t}.status = 'RUNNING' AND ${t}.claim_token = f.token
       RETURNING CAST(${t}.id AS TEXT) AS id`,
    /** Of these attempts, those whose outcome is already on the row under the same claim (token kept by fail). */
    failedBefore: `SELECT CAST(id AS TEXT) AS id FROM ${t} NOT INDEXED
       WHERE (id, claim_token, status, retry_count) IN
         (SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(:attempts))`,
    release: `UPDATE ${t} NOT INDEXED
       SET status = 'PENDING', claim_token = NULL, lease_until = NULL, updated_at = ${DB_NOW}
       WHERE status = 'RUNNING' AND ${REFS}
       RETURNING CAST(id AS TEXT) AS id`,
    /** A requeued command's old claim lets go: claimable at once. */
    releaseRevoked: `UPDATE ${t} NOT INDEXED
       SET claim_token = NULL, lease_until = NULL, updated_at = ${DB_NOW}
       WHERE status = 'PENDING' AND ${REFS}
       RETURNING CAST(id AS TEXT) AS id`,

    /**
     * Leases that expired on the database clock, oldest first, in a bounded batch. A reclaimed
     * command keeps its due time (an orphan keeps its place in the queue); past the rescue limit it
     * is DEAD.
     */
    reclaimHung: `UPDATE ${t} NOT INDEXED
       SET status = CASE WHEN ${PAST_RESCUE_LIMIT} THEN 'DEAD' ELSE 'PENDING' END,
           last_error = CASE WHEN ${PAST_RESCUE_LIMIT} THEN :deadError ELSE last_error END,
           finished_at = CASE WHEN ${PAST_RESCUE_LIMIT} THEN ${DB_NOW} ELSE NULL END,
           history = ${withAttempt(
             t,
             `CASE WHEN ${PAST_RESCUE_LIMIT} THEN 'dead' ELSE 'lease_expired' END`,
             `CASE WHEN ${PAST_RESCUE_LIMIT} THEN :deadError END`,
           )},
           rescue_count = rescue_count + 1,
           claim_token = NULL, lease_until = NULL, updated_at = ${DB_NOW}
       WHERE status = 'RUNNING' AND lease_until < ${DB_NOW} AND id IN (
         SELECT id FROM ${t} INDEXED BY ${t}_lease
         WHERE status = 'RUNNING' AND lease_until < ${DB_NOW}
         ORDER BY lease_until, id
         LIMIT :limit)
       RETURNING CAST(id AS TEXT) AS id, type, status`,

    // Admin transitions: one write guarded by the transition's source states (:sources, from core).
    // A retry keeps the counts and starts the retry budget and rescue limit from them.
    retry: `UPDATE ${t}
       SET status = 'PENDING', retry_count_at_retry = retry_count, rescue_count_at_retry = rescue_count,
           next_run_at = :now,
           claim_token = NULL, lease_until = NULL, finished_at = NULL, updated_at = ${DB_NOW}
       WHERE id = :id AND status IN (SELECT value FROM json_each(:sources))
       RETURNING ${COLUMNS}`,
    /** The old claim's token and lease stay on the row: they hold the command back (NOT_HELD_BACK). */
    requeue: `UPDATE ${t}
       SET status = 'PENDING', next_run_at = :now, updated_at = ${DB_NOW},
           history = ${withAttempt(t, `'requeued'`, 'NULL')}
       WHERE id = :id AND status IN (SELECT value FROM json_each(:sources))
       RETURNING ${COLUMNS}`,
    /** kill and cancel: both end in CANCELLED, a running attempt as `killed`; they differ only in their sources. */
    cancel: `UPDATE ${t}
       SET status = 'CANCELLED', last_error = COALESCE(:reason, last_error), claim_token = NULL,
           lease_until = NULL, finished_at = ${DB_NOW}, updated_at = ${DB_NOW},
           history = CASE WHEN status = 'RUNNING' THEN ${withAttempt(t, `'killed'`, ':reason')} ELSE history END
       WHERE id = :id AND status IN (SELECT value FROM json_each(:sources))
       RETURNING ${COLUMNS}`,

    get: `SELECT ${COLUMNS} FROM ${t} WHERE id = :id UNION ALL SELECT ${COLUMNS} FROM ${t}_history WHERE id = :id`,
    getMany: `SELECT * FROM (
         SELECT ${COLUMNS} FROM ${t} WHERE id IN (SELECT value FROM json_each(:ids))
         UNION ALL
         SELECT ${COLUMNS} FROM ${t}_history WHERE id IN (SELECT value FROM json_each(:ids)))
       ORDER BY CAST(id AS INTEGER)`,
    /**
     * Newest first by creation time, the id breaking ties, with only the conditions asked for (fixed
     * fragments; values stay parameters), so the planner can walk the (status, created_at, id) or
     * the (created_at, id) index backwards and stop at LIMIT: each table's page, then the newest of
     * both (the history only when SUCCESS is among the statuses asked for: it holds nothing else).
     */
    list: (filter: ListFilter) => {
      const page = (table: string): string => `SELECT * FROM (SELECT ${COLUMNS} FROM ${table}
       WHERE ${
         [
           filter.status ? `status = :status` : null,
           filter.statuses ? `status IN (SELECT value FROM json_each(:statuses))` : null,
           filter.type ? `type = :type` : null,
           filter.bizKey ? `biz_key = :bizKey` : null,
           filter.before ? `(created_at, ${table}.id) < (:beforeAt, :before)` : null,
         ]
           .filter((c) => c !== null)
           .join(' AND ') || '1'
       }
       ORDER BY created_at DESC, ${table}.id DESC
       LIMIT :limit)`;
      if (!filter.history) return page(t);
      return `SELECT * FROM (${page(t)} UNION ALL ${page(`${t}_history`)})
       ORDER BY created_at DESC, CAST(id AS INTEGER) DESC
       LIMIT :limit`;
    },
    counts: `SELECT status, type, SUM(count) AS count FROM (
         SELECT status, type, COUNT(*) AS count FROM ${t} GROUP BY status, type
         UNION ALL
         SELECT status, type, COUNT(*) AS count FROM ${t}_history GROUP BY status, type)
       GROUP BY status, type ORDER BY status, type`,
    oldestDue: `SELECT MIN(next_run_at) FROM ${t} INDEXED BY ${t}_due WHERE status = 'PENDING' AND next_run_at <= ?`,
    /** Dead letters counted up to a limit, from the (status, id) index: the cost stays that limit. */
    deadLettersUpTo: `SELECT COUNT(*) FROM (
         SELECT 1 FROM ${t} INDEXED BY ${t}_status_created WHERE status = 'DEAD' LIMIT ?)`,
    /** Outcomes finished in [:from, :to), by status and latency bucket, from the finished_at indexes. */
    outcomeCounts: `SELECT status, latency_bucket, COUNT(*) AS count FROM (
         SELECT status,
                (SELECT COUNT(*) FROM json_each(:bounds) WHERE value <= finished_at - created_at)
                  AS latency_bucket
         FROM (SELECT status, created_at, finished_at FROM ${t} INDEXED BY ${t}_finished
               WHERE finished_at >= :from AND finished_at < :to AND status IN ('SUCCESS', 'DEAD')
               UNION ALL
               SELECT status, created_at, finished_at FROM ${t}_history INDEXED BY ${t}_history_finished
               WHERE finished_at >= :from AND finished_at < :to AND status IN ('SUCCESS', 'DEAD')))
       GROUP BY status, latency_bucket
       ORDER BY status, latency_bucket`,
    /** Finished rows older than the cutoff, a bounded batch: the history's (purged first), then the command table's. */
    purgeHistory: purge(`${t}_history`, `${t}_history_finished`),
    purge: purge(t, `${t}_finished`),
    /** The edges (as dependant, then as dependency) and workflow steps of the purged commands :ids (JSON). */
    purgeEdgesAsDependant: `DELETE FROM ${t}_dependencies WHERE dependant_id IN (SELECT value FROM json_each(:ids))`,
    purgeEdgesAsDependency: `DELETE FROM ${t}_dependencies WHERE dependency_id IN (SELECT value FROM json_each(:ids))`,
    purgeSteps: `DELETE FROM ${t}_workflow_steps WHERE command_id IN (SELECT value FROM json_each(:ids))`,
  };
}

/** Which optional conditions a list query has. */
export interface ListFilter {
  /** One status: `status = ?`, which walks the (status, created_at, id) index in order without a sort. */
  readonly status: boolean;
  readonly statuses: boolean;
  readonly type: boolean;
  readonly bizKey: boolean;
  /** Below a cursor's (created_at, id). */
  readonly before: boolean;
  /** Whether the history can hold what is asked for (SUCCESS among the statuses, or any status). */
  readonly history: boolean;
}

export type SqliteSql = ReturnType<typeof sqliteSql>;
