import { ATTEMPT_HISTORY_LENGTH, TRANSITION_SOURCES } from '@asynccmd/core/store-kit';
import { FLOW_KEY_OF_BOUND_PATH, insertedFlowKey, updatedFlowKey } from './flow-keys.js';
import { historyTable } from './history.js';
import { anyLinksSql, commandLinks } from './purge-links.js';

/**
 * Every statement of the MySQL / MariaDB store, built once per (validated) table name. Values are
 * always bound parameters (`?`); an array bound to `IN (?)` expands into a list (mysql2 `query()`).
 *
 * Times are DATETIME(3) in UTC. DB_NOW is the database clock, in UTC whatever the server's or the
 * session's time zone (NOW(3) would follow the session time zone); leases and updated_at use it.
 * Due checks compare with the application clock's `now`, bound as UTC text.
 *
 * With no RETURNING on MariaDB, a batched complete that did not finish every ref reads back which
 * of them are SUCCESS under their own claim token, which a complete leaves on the row (the record
 * never shows it: a claim token is reported only while RUNNING): what this call finished, or an
 * earlier try of it whose reply was lost. A failed attempt's outcome keeps it too (failedBefore);
 * every other transition out of RUNNING clears it.
 */
export const DB_NOW = 'UTC_TIMESTAMP(3)';

/** leaseUntil for a claim or heartbeat; the bound value is the lease in microseconds. */
const LEASE_UNTIL = `${DB_NOW} + INTERVAL ? MICROSECOND`;

/**
 * The columns of a record. The claims read them without the result (CLAIM_COLUMNS): a claimed
 * RUNNING row never has one (SUCCESS is final, and an admin retry starts only from DEAD).
 */
const CLAIM_COLUMNS = `id, type, biz_key, payload, status, max_retry, retry_count, rescue_count, next_run_at,
  last_error, owner, claim_token, lease_until, idempotent, headers, created_at, updated_at, started_at,
  finished_at, retry_count_at_retry, rescue_count_at_retry, claimed_by, history, priority, ordering_key`;
const COLUMNS = `${CLAIM_COLUMNS}, result, progress_done, progress_total`;

/** A DATETIME (UTC) in epoch milliseconds, as the history keeps times; no time zone is involved. */
const epochMs = (time: string): string =>
  `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ${time}) DIV 1000`;

/**
 * The row's history (NULL: none yet) with the attempt its claim ran appended, ending now with
 * `outcome` and `error` (SQL expressions), and only the latest ATTEMPT_HISTORY_LENGTH kept: the
 * array never holds more, so dropping its first is enough. Written in the same UPDATE as the
 * outcome, as its first assignment: MySQL evaluates SET left to right, and later assignments
 * would otherwise show through.
 */
const withAttempt = (outcome: string, error: string): string =>
  `JSON_ARRAY_APPEND(
     CASE WHEN JSON_LENGTH(COALESCE(history, '[]')) >= ${ATTEMPT_HISTORY_LENGTH} THEN JSON_REMOVE(history, '$[0]')
          ELSE COALESCE(history, '[]') END,
     '$', JSON_OBJECT('startedAt', ${epochMs('started_at')}, 'finishedAt', ${epochMs(DB_NOW)},
                      'instance', claimed_by, 'outcome', ${outcome}, 'error', ${error}))`;

/**
 * The SET of a replacing submit's write of the key's holder: this submit's contents when the
 * holder is PENDING, its own otherwise; last, LAST_INSERT_ID() set to minus its id when written,
 * else to `leftAlone`.
 */
const replacingSet = (t: string, withRunAt: boolean, leftAlone: string): string => `
         payload = IF(status = 'PENDING', ?, payload),
         flow_key = IF(status = 'PENDING', ${updatedFlowKey(t)}, flow_key),
         max_retry = IF(status = 'PENDING', ?, max_retry),
         headers = IF(status = 'PENDING', ?, headers),
         priority = IF(status = 'PENDING', ?, priority),${
           withRunAt
             ? `\n         next_run_at = IF(status = 'PENDING', COALESCE(?, ${DB_NOW}), next_run_at),`
             : ''
         }
         updated_at = IF(LAST_INSERT_ID(IF(status = 'PENDING', -CAST(id AS SIGNED), ${leftAlone})) < 0,
                         ${DB_NOW}, updated_at)`;

/** The rescue a reclaim would add passes the limit (bound), counted since the latest admin retry. */
const PAST_RESCUE_LIMIT = 'rescue_count + 1 - rescue_count_at_retry > ?';

const INSERT_COLUMNS = `(type, biz_key, payload, status, max_retry, next_run_at, owner, idempotent, headers,
  priority, ordering_key, created_at, updated_at, flow_key)`;

/**
 * One inserted row: type, biz_key, payload, max_retry, run_at (null: now), owner, idempotent, headers,
 * priority, ordering_key, then what its flow key is read from (flow-keys.ts): alone, its type twice
 * (looked up by the statement); in a batch, its type's key path twice (read before, null: none).
 */
const insertRow = (t: string, alone: boolean): string =>
  `(?, ?, ?, 'PENDING', ?, COALESCE(?, ${DB_NOW}), ?, ?, ?, ?, ?, ${DB_NOW}, ${DB_NOW}, ${
    alone ? insertedFlowKey(t) : FLOW_KEY_OF_BOUND_PATH
  })`;

/**
 * A PENDING row no requeued claim holds back: a requeue keeps the old claim's token and lease on
 * the row until that claim lets go (releaseRevoked) or the lease runs out, its executor may still run.
 */
export const NOT_HELD_BACK = `(lease_until IS NULL OR lease_until < ${DB_NOW})`;

/** The claimable rows; the claims read them in the order the (status, type, priority, next_run_at, id) index holds them. */
const DUE = `status = 'PENDING' AND next_run_at <= ? AND type IN (?) AND ${NOT_HELD_BACK}`;
/** DUE of one type (bound: now, the type). */
const DUE_OF_TYPE = `status = 'PENDING' AND next_run_at <= ? AND type = ? AND ${NOT_HELD_BACK}`;

/**
 * A command (of `table`, as `outer` names it) that is first of its ordering key: no command of
 * the key with a smaller id is PENDING, RUNNING or DEAD (ordering_unfinished holds the key only in
 * those statuses; a dead one holds it until a person retries, cancels or kills it). Once true it
 * stays true: a command leaves those statuses only for good, and no command of the key gets a
 * smaller id later (keyed inserts lock the key's slot first, see store.ts). Read from idx_keyed,
 * where a command without a key is one NULL entry that its status changes never touch.
 */
export const firstOfKey = (table: string, outer: string): string =>
  `(${outer}.ordering_key IS NULL OR NOT EXISTS (
     SELECT 1 FROM ${table} AS earlier FORCE INDEX (idx_keyed)
     WHERE earlier.ordering_unfinished = ${outer}.ordering_key AND earlier.id < ${outer}.id))`;

/** The claim order: the most urgent priority (lowest number) first, then the oldest due, then id. */
export const CLAIM_ORDER = 'priority, next_run_at, id';

/** What a claim writes into a row; bound: the token, the instance, then the lease in microseconds. */
export const CLAIM = `status = 'RUNNING', claim_token = ?, claimed_by = ?, lease_until = ${LEASE_UNTIL},
           started_at = ${DB_NOW}, updated_at = ${DB_NOW}`;

/**
 * Claim refs of `tokens` distinct claim tokens; bound: every ref's id as one list, then each
 * token (and, with more than one, the ids of its refs as a list) — see store `refValues`. A batch
 * of outcomes mostly comes from one or two claim rounds, so this binds about one value per ref,
 * where a `(id, claim_token)` pair per ref would bind three (both sides are escaped and parsed).
 * The plain `id IN (…)` gives every count a primary-key range of exactly its rows; each token's
 * own list keeps the fence exact: a row matches only under the token of its own ref.
 */
function refs(tokens: number): string {
  if (tokens === 1) return 'id IN (?) AND claim_token = ?';
  return `id IN (?) AND (${Array.from({ length: tokens }, () => '(claim_token = ? AND id IN (?))').join(' OR ')})`;
}

const sources = (name: keyof typeof TRANSITION_SOURCES): string =>
  TRANSITION_SOURCES[name].map((s) => `'${s}'`).join(', ');

export function mysqlSql(t: string) {
  const table = `\`${t}\``;
  // Finished commands move to the history (history.ts): every read of a command reads both tables,
  // in one statement, so one snapshot sees each command in exactly one of them.
  const history = `\`${historyTable(t)}\``;
  // Statements that name their rows by id go through the primary key. With few rows in a status
  // the optimizer would rather walk a status index (idx_due or idx_finished, whose estimate ties
  // with the key's one row), and under REPEATABLE READ that locks every row it walks: other
  // instances' claims included, so their outcome writes would queue on each other.
  const byId = `${table} FORCE INDEX (PRIMARY)`;
  // Due rows are read in idx_claim_type's order: (status, type, claim order), so a claim of one type
  // reads only that type's rows, in claim order (a claim of several is shared among them one type
  // at a time: claim-strategies.ts). Left to itself the optimizer may take another index that starts
  // with status or type (idx_due, idx_finished, uq_active_key) and sort every pending row.
  const byDue = `${table} FORCE INDEX (idx_claim_type)`;
  return {
    now: `SELECT ${DB_NOW} AS now`,
    ping: 'SELECT 1',
    /**
     * A plain INSERT: its duplicate-key error says the type was paused already. Not ON DUPLICATE
     * KEY UPDATE (mysql2's FOUND_ROWS flag makes a kept row count 1, as an inserted one) nor INSERT
     * IGNORE (it turns every other error into a warning too).
     */
    typePause: `INSERT INTO \`${t}_paused_types\` (type, paused_at, reason) VALUES (?, ${DB_NOW}, ?)`,
    typeResume: `DELETE FROM \`${t}_paused_types\` WHERE type = ?`,
    typePauseList: `SELECT type, paused_at, reason FROM \`${t}_paused_types\` ORDER BY type`,
    lastInsertId: 'SELECT LAST_INSERT_ID() AS id',
    /** A harmless statement whose OK packet tells whether the connection is inside a transaction. */
    probeTransaction: 'DO 0',

    /**
     * `rows` commands in one statement; InnoDB gives a simple multi-row insert consecutive ids. One
     * row looks its type's key field up itself; more bind the key paths `insertPlan` read.
     */
    insertMany: (rows: number) =>
      `INSERT INTO ${table} ${INSERT_COLUMNS} VALUES ${Array.from({ length: rows }, () => insertRow(t, rows === 1)).join(', ')}`,
    /**
     * Read before a batch insert, on its connection: the step of its ids (auto_increment_increment,
     * a session variable) and the key path of each of its types (JSON object; null: none keyed).
     * Bound: the types, as a list.
     */
    insertPlan: `SELECT @@auto_increment_increment AS step,
       (SELECT JSON_OBJECTAGG(keyed_type, key_path) FROM \`${t}_key_fields\` WHERE keyed_type IN (?)) AS paths`,
    /*
     * A replacing idempotent submit (onPending 'replace' or 'replace-keep-run-at') locks the
     * holder's primary key first, as outcome writes do (they lock the row, then its active_key
     * entry as it goes NULL): a submit locking the active_key entry first, then the row, would
     * deadlock with a holder finishing at that moment. So it finds the holder with a plain read
     * (no lock), then writes it by id; only when no holder is found does it insert. Each writing
     * statement leaves what it did in LAST_INSERT_ID(), read back by `lastInsertIdSigned`.
     */
    /** LAST_INSERT_ID() zeroed, and the holder of (type, active_key) as the caller's snapshot sees it (no lock). */
    replacingHolderSeen: `SELECT LAST_INSERT_ID(0) AS zeroed,
       (SELECT CAST(id AS CHAR) FROM ${table} WHERE type = ? AND active_key = ?) AS id`,
    /**
     * The holder seen, by id, if it still holds the key: written when PENDING, left as it is
     * otherwise (RUNNING: its executor read the old payload). LAST_INSERT_ID(): minus its id when
     * written, its id when left alone, still 0 when it holds the key no more. Parameters: payload,
     * max_retry, headers, priority, (`withRunAt`: run_at, null: now,) id, type, biz_key.
     */
    replaceHolder: (withRunAt: boolean) =>
      `UPDATE ${table} FORCE INDEX (PRIMARY) SET ${replacingSet(t, withRunAt, 'CAST(id AS SIGNED)')}
       WHERE id = ? AND type = ? AND active_key = ?`,
    /**
     * The insert when no holder was found: on the active key's duplicate (a holder committed
     * meanwhile) it writes that holder as replaceHolder would. LAST_INSERT_ID(): the new id when it
     * inserted, minus the holder's id when written, 0 when left alone. Parameters: INSERT_ROW's,
     * then replaceHolder's up to its id.
     */
    insertReplacingPending: (withRunAt: boolean) =>
      `INSERT INTO ${table} ${INSERT_COLUMNS} VALUES ${insertRow(t, true)}
       ON DUPLICATE KEY UPDATE ${replacingSet(t, withRunAt, '0')}`,
    /** LAST_INSERT_ID() as signed text: the replacing statements set it below zero for a write. */
    lastInsertIdSigned: 'SELECT CAST(CAST(LAST_INSERT_ID() AS SIGNED) AS CHAR) AS id',
    /**
     * The unfinished idempotent command holding (type, bizKey): the generated active_key column. A
     * locking read sees the latest committed holder whatever the caller's snapshot, on the caller's
     * own connection (the refused insert already share-locked that index entry).
     */
    activeHolder: `SELECT id FROM ${table} WHERE type = ? AND active_key = ? LOCK IN SHARE MODE`,
    /** activeHolder and its status: a replacing submit asks again when the holder it left alone is PENDING by now. */
    activeHolderStatus: `SELECT id, status FROM ${table} WHERE type = ? AND active_key = ? LOCK IN SHARE MODE`,

    /** The `n` key-lock slots of a keyed submit (bound one by one), locked to the end of its transaction. */
    lockKeySlots: (n: number) =>
      `SELECT slot FROM \`${t}_key_locks\` WHERE slot IN (${Array.from({ length: n }, () => '?').join(', ')})
       ORDER BY slot FOR UPDATE`,
    /** Step 1, SKIP LOCKED form: lock this round's candidates, skipping rows other claimers hold. */
    lockDue: `SELECT id FROM ${byDue} WHERE ${DUE} AND ${firstOfKey(table, table)}
       ORDER BY ${CLAIM_ORDER} LIMIT ? FOR UPDATE SKIP LOCKED`,
    /**
     * lockDue while claims from the head are slow (core store-kit head-skip.ts): the candidates are
     * read without locks, in claim order (a consistent read passes the delete-marked entries of
     * claimed rows at little cost, where a locking read under READ COMMITTED looks each one up in
     * the primary key), then locked by primary key, each one's status and due time read again
     * under its lock. Twice `limit` candidates, so a concurrent claimer that read the same ones
     * takes the next after those locked. The derived table is materialized in its order and the
     * outer LIMIT stops after `limit` locked rows. Bound: now, types, candidates, now, limit.
     */
    lockDueUnlocked: `SELECT c.id FROM (
         SELECT id FROM ${byDue} WHERE ${DUE} AND ${firstOfKey(table, table)} ORDER BY ${CLAIM_ORDER} LIMIT ?
       ) AS due STRAIGHT_JOIN ${table} AS c FORCE INDEX (PRIMARY) ON c.id = due.id
       WHERE c.status = 'PENDING' AND c.next_run_at <= ? AND (c.lease_until IS NULL OR c.lease_until < ${DB_NOW})
       LIMIT ? FOR UPDATE SKIP LOCKED`,
    /**
     * Each type's share (`n`) of the first rows a claim of `types` types would take in claim
     * order, read without locks: the first (limit) of each type from its own range of
     * idx_claim_type, merged, the first (limit) of all counted per type; a type with none is not
     * in the answer. Bound: now, a type, limit for each type; then limit.
     */
    firstOfTypes: (types: number) =>
      `SELECT type, COUNT(*) AS n FROM (
         SELECT type FROM (${Array.from(
           { length: types },
           () => `(SELECT type, priority, next_run_at, id FROM ${byDue}
           WHERE ${DUE_OF_TYPE} AND ${firstOfKey(table, table)} ORDER BY ${CLAIM_ORDER} LIMIT ?)`,
         ).join(' UNION ALL ')}) AS heads ORDER BY ${CLAIM_ORDER} LIMIT ?
       ) AS firsts GROUP BY type`,
    /** Marks locked candidates (ids bound as a list). */
    markClaimed: `UPDATE ${byId}
       SET ${CLAIM}
       WHERE id IN (?) AND status = 'PENDING'`,
    /**
     * Step 1, legacy form (servers without SKIP LOCKED): one UPDATE joined to a derived table of
     * this round's candidates. The derived table walks idx_claim in order and stops after LIMIT rows
     * (MySQL refuses a subquery on the updated table, error 1093, and LIMIT inside IN); the join
     * then reaches each candidate by primary key. The plain `WHERE id IN (SELECT id FROM (…) t)`
     * was planned as a dependent subquery probed once per row of the whole primary key.
     * FOR UPDATE locks the candidates as they are read: a concurrent claimer waits on them, then
     * passes over the rows taken meanwhile, where shared locks (the default read of an UPDATE's
     * subquery) would let two claimers read the same rows and deadlock upgrading them. The outer
     * WHERE repeats status and due time, so a row another claimer took meanwhile is left alone.
     * STRAIGHT_JOIN keeps the candidates first; `due` has only `id`, so other columns name c's.
     * Bound: now, types, limit (candidates), token, instance, lease, now, types (outer guard).
     */
    markDueLegacy: `UPDATE (
         SELECT id FROM ${byDue} WHERE ${DUE} AND ${firstOfKey(table, table)} ORDER BY ${CLAIM_ORDER} LIMIT ? FOR UPDATE
       ) AS due STRAIGHT_JOIN ${table} AS c ON c.id = due.id
       SET ${CLAIM}
       WHERE ${DUE}`,
    anyDue: `SELECT 1 AS due FROM ${byDue} WHERE ${DUE} AND ${firstOfKey(table, table)} LIMIT 1`,
    /** Step 2: this round's rows, read back by their fresh token (indexed). */
    claimedBy: `SELECT ${CLAIM_COLUMNS} FROM ${table} WHERE claim_token = ? AND status = 'RUNNING' ORDER BY ${CLAIM_ORDER}`,
    /**
     * claimById: one row by primary key; `types` is optional (the list form is a second statement).
     * The last bound value says whether the row must have no ordering key (1) or one (0): MySQL
     * refuses a subquery on the table an UPDATE writes, so a keyed command is first checked with
     * `firstOfKeyById` and then claimed with 0 (safe: being first of its key stays true).
     */
    claimById: `UPDATE ${byId}
       SET ${CLAIM}
       WHERE id = ? AND status = 'PENDING' AND next_run_at <= ? AND ${NOT_HELD_BACK} AND (ordering_key IS NULL) = ?`,
    claimByIdOfTypes: `UPDATE ${byId}
       SET ${CLAIM}
       WHERE id = ? AND status = 'PENDING' AND next_run_at <= ? AND ${NOT_HELD_BACK} AND type IN (?)
         AND (ordering_key IS NULL) = ?`,
    /** A command with an ordering key that is first of its key (a row) or not (none). */
    firstOfKeyById: `SELECT 1 AS first FROM ${table} AS c
       WHERE c.id = ? AND c.ordering_key IS NOT NULL AND ${firstOfKey(table, 'c')}`,
    claimedRow: `SELECT ${CLAIM_COLUMNS} FROM ${table} WHERE id = ? AND claim_token = ? AND status = 'RUNNING'`,

    // Outcome writes: fenced by status and claim token, so a stale executor changes nothing.
    heartbeat: (tokens: number) =>
      `UPDATE ${byId} SET lease_until = ${LEASE_UNTIL}, updated_at = ${DB_NOW}
       WHERE status = 'RUNNING' AND ${refs(tokens)}`,
    /**
     * Progress reports, one per claim. Bound: [id, token, done] per report, then [id, token, total]
     * per report, then the refs.
     */
    reportProgress: (reports: number, tokens: number) => {
      const each = (column: string): string =>
        `CASE ${Array.from({ length: reports }, () => 'WHEN id = CAST(? AS UNSIGNED) AND claim_token = ? THEN ?').join(' ')} ELSE ${column} END`;
      return `UPDATE ${byId}
       SET progress_done = ${each('progress_done')}, progress_total = ${each('progress_total')},
           updated_at = ${DB_NOW}
       WHERE status = 'RUNNING' AND ${refs(tokens)}`;
    },
    heldRefs: (tokens: number) =>
      `SELECT id, claim_token FROM ${byId} WHERE status = 'RUNNING' AND ${refs(tokens)}`,
    /**
     * Bound: the refs. An earlier attempt's error stays in the history, not in last_error; the
     * succeeded attempt is the row itself (see core attemptHistory), so the commonest write
     * appends nothing. A command with dependants is left to dependencies.ts completeMarked, which
     * settles them in the same transaction.
     */
    complete: (tokens: number) =>
      `UPDATE ${byId}
       SET status = 'SUCCESS', lease_until = NULL, finished_at = ${DB_NOW},
           updated_at = ${DB_NOW}, last_error = NULL
       WHERE status = 'RUNNING' AND has_dependants = 0 AND ${refs(tokens)}`,
    /**
     * complete of attempts `results` of which left a result, written by the completion itself, so
     * a fenced attempt's result goes with it (MySQL assigns SET left to right; claim_token stays).
     * Bound: id, token and result of each, then the refs.
     */
    completeWithResults: (tokens: number, results: number) =>
      `UPDATE ${byId}
       SET result = CASE ${Array.from({ length: results }, () => 'WHEN id = CAST(? AS UNSIGNED) AND claim_token = ? THEN ?').join(' ')}
                    ELSE result END,
           status = 'SUCCESS', lease_until = NULL, finished_at = ${DB_NOW},
           updated_at = ${DB_NOW}, last_error = NULL
       WHERE status = 'RUNNING' AND has_dependants = 0 AND ${refs(tokens)}`,
    /**
     * One attempt's SUCCESS in the caller's transaction (transactionalCompletion), its result with
     * it; affected rows tell whether the claim still held. Bound: result (or null), id, token.
     */
    completeInTransaction: `UPDATE ${byId}
       SET result = ?, status = 'SUCCESS', lease_until = NULL, finished_at = ${DB_NOW},
           updated_at = ${DB_NOW}, last_error = NULL
       WHERE id = ? AND status = 'RUNNING' AND claim_token = ?`,
    /**
     * The SUCCESS of RUNNING rows this transaction has locked and found held under their claims
     * (dependencies.ts completeMarked), `results` of them with a result, in one statement. Bound:
     * id and result of each of those, then the ids.
     */
    completeHeld: (results: number) =>
      `UPDATE ${byId}
       SET result = ${results === 0 ? 'NULL' : `CASE ${Array.from({ length: results }, () => 'WHEN id = CAST(? AS UNSIGNED) THEN ?').join(' ')} ELSE NULL END`},
           status = 'SUCCESS', lease_until = NULL, finished_at = ${DB_NOW}, updated_at = ${DB_NOW}, last_error = NULL
       WHERE status = 'RUNNING' AND id IN (?)`,
    /** Whether one claim's command is SUCCESS under it. Bound: id, token, twice (both tables). */
    succeededUnder: `SELECT 1 AS held FROM ${byId} WHERE id = ? AND status = 'SUCCESS' AND claim_token = ?
       UNION ALL SELECT 1 FROM ${history} WHERE id = ? AND claim_token = ?`,
    /**
     * Of the refs, those SUCCESS under their own claim (this complete's, or an earlier try's, moved
     * to the history since). Bound: the refs' values twice.
     */
    completedBy: (tokens: number) => `SELECT id FROM ${byId} WHERE status = 'SUCCESS' AND ${refs(tokens)}
       UNION ALL SELECT id FROM ${history} WHERE ${refs(tokens)}`,
    /**
     * Bound: status and last_error (for the history), status, retry_count, next_run_at, last_error,
     * status again (for finished_at), id, token.
     */
    failOne: `UPDATE ${byId}
       SET history = ${withAttempt(`IF(? = 'DEAD', 'dead', 'failed')`, '?')},
           status = ?, retry_count = ?, next_run_at = ?, last_error = ?, lease_until = NULL,
           finished_at = CASE WHEN ? = 'DEAD' THEN ${DB_NOW} ELSE NULL END, updated_at = ${DB_NOW}
       WHERE id = ? AND status = 'RUNNING' AND claim_token = ?`,
    /**
     * fail of more than one attempt runs in a transaction: lock the rows still held (lockHeld),
     * then write each one's outcome in this one statement. Bound: for each of status and last_error
     * (for the history), status, retry_count, next_run_at, last_error and the status again (for
     * finished_at), n pairs of (id, value); then the ids.
     */
    failHeld: (n: number) => {
      const byRow = (value: string): string =>
        `CASE id ${Array.from({ length: n }, () => `WHEN ? THEN ${value}`).join(' ')} END`;
      return `UPDATE ${byId}
       SET history = ${withAttempt(byRow(`IF(? = 'DEAD', 'dead', 'failed')`), byRow('?'))},
           status = ${byRow('?')}, retry_count = ${byRow('?')}, next_run_at = ${byRow('?')},
           last_error = ${byRow('?')}, finished_at = ${byRow(`IF(? = 'DEAD', ${DB_NOW}, NULL)`)},
           lease_until = NULL, updated_at = ${DB_NOW}
       WHERE id IN (?) AND status = 'RUNNING'`;
    },
    /**
     * Of `n` failed attempts, those whose outcome is already on the row under the same claim (fail
     * keeps the claim token, as complete does): an earlier try whose reply was lost. Bound: the ids
     * as one list, then id, token, status and retry count per attempt.
     */
    failedBefore: (n: number) =>
      `SELECT id FROM ${byId} WHERE id IN (?)
       AND (id, claim_token, status, retry_count) IN (${Array.from({ length: n }, () => '(?, ?, ?, ?)').join(', ')})`,
    /** release and fail (of several attempts) run in a transaction: lock the rows still held, then move exactly those. */
    lockHeld: (tokens: number) =>
      `SELECT id, claim_token FROM ${byId} WHERE status = 'RUNNING' AND ${refs(tokens)} ORDER BY id FOR UPDATE`,
    /** releaseRevoked likewise: the requeued rows these old claims still hold back. */
    lockHeldBack: (tokens: number) =>
      `SELECT id FROM ${byId} WHERE status = 'PENDING' AND ${refs(tokens)} ORDER BY id FOR UPDATE`,
    releaseRevoked: `UPDATE ${byId} SET claim_token = NULL, lease_until = NULL, updated_at = ${DB_NOW}
       WHERE id IN (?) AND status = 'PENDING'`,
    release: `UPDATE ${byId} SET status = 'PENDING', claim_token = NULL, lease_until = NULL, updated_at = ${DB_NOW}
       WHERE id IN (?) AND status = 'RUNNING'`,

    /** A plain read first: most rounds find nothing hung and need no transaction or lock. */
    anyHung: `SELECT 1 AS hung FROM ${table} WHERE status = 'RUNNING' AND lease_until < ${DB_NOW} LIMIT 1`,
    /** Leases that expired on the database clock, oldest first, in a bounded batch (strategy adds the lock clause). */
    hungCandidates: `SELECT id, type, rescue_count, rescue_count_at_retry FROM ${table}
       WHERE status = 'RUNNING' AND lease_until < ${DB_NOW}
       ORDER BY lease_until, id LIMIT ?`,
    /**
     * Back to PENDING keeping its due time (an orphan keeps its place in the queue), or DEAD past
     * the rescue limit. Bound: maxRescues twice and the dead letter's text (for the history), then
     * maxRescues twice, the dead letter's text, maxRescues, the ids. Guarded by status and lease again.
     */
    reclaim: `UPDATE ${byId}
       SET history = ${withAttempt(
         `IF(${PAST_RESCUE_LIMIT}, 'dead', 'lease_expired')`,
         `IF(${PAST_RESCUE_LIMIT}, ?, NULL)`,
       )},
           status = CASE WHEN ${PAST_RESCUE_LIMIT} THEN 'DEAD' ELSE 'PENDING' END,
           last_error = CASE WHEN ${PAST_RESCUE_LIMIT} THEN ? ELSE last_error END,
           finished_at = CASE WHEN ${PAST_RESCUE_LIMIT} THEN ${DB_NOW} ELSE NULL END,
           rescue_count = rescue_count + 1, claim_token = NULL, lease_until = NULL, updated_at = ${DB_NOW}
       WHERE id IN (?) AND status = 'RUNNING' AND lease_until < ${DB_NOW}`,

    // Admin transitions: one write guarded by the transition's source states (from core). A retry
    // keeps the counts and starts the retry budget and rescue limit from them.
    retry: `UPDATE ${byId}
       SET status = 'PENDING', retry_count_at_retry = retry_count, rescue_count_at_retry = rescue_count,
           next_run_at = ?, claim_token = NULL,
           lease_until = NULL, finished_at = NULL, updated_at = ${DB_NOW}
       WHERE id = ? AND status IN (${sources('retry')})`,
    /** The old claim's token and lease stay on the row: they hold the command back (NOT_HELD_BACK). */
    requeue: `UPDATE ${byId}
       SET history = ${withAttempt(`'requeued'`, 'NULL')}, status = 'PENDING', next_run_at = ?,
           updated_at = ${DB_NOW}
       WHERE id = ? AND status IN (${sources('requeue')})`,
    /** Bound: the reason twice (a running attempt ends `killed` with it), the id. */
    kill: `UPDATE ${byId}
       SET history = IF(status = 'RUNNING', ${withAttempt(`'killed'`, '?')}, history),
           status = 'CANCELLED', last_error = COALESCE(?, last_error), claim_token = NULL, lease_until = NULL,
           finished_at = ${DB_NOW}, updated_at = ${DB_NOW}
       WHERE id = ? AND status IN (${sources('kill')})`,
    cancel: `UPDATE ${byId}
       SET status = 'CANCELLED', last_error = COALESCE(?, last_error), claim_token = NULL, lease_until = NULL,
           finished_at = ${DB_NOW}, updated_at = ${DB_NOW}
       WHERE id = ? AND status IN (${sources('cancel')})`,

    /** Bound: the id twice. */
    get: `SELECT ${COLUMNS} FROM ${table} WHERE id = ? UNION ALL SELECT ${COLUMNS} FROM ${history} WHERE id = ?`,
    /** Bound: the ids (a list) twice. */
    getMany: `SELECT * FROM (SELECT ${COLUMNS} FROM ${table} WHERE id IN (?)
       UNION ALL SELECT ${COLUMNS} FROM ${history} WHERE id IN (?)) AS c ORDER BY id`,
    /**
     * Newest first by creation time, the id breaking ties (idx_created holds (created_at, id));
     * the optional filters are added by the store in this order. Each table gives its newest
     * matches (through its creation index) and the merge keeps the newest of those; the history,
     * which holds SUCCESS only, is left out of a list of other statuses. Bound: the filters' values
     * and the limit, once more for the history when `withHistory`.
     */
    list: (filters: readonly ('status' | 'type' | 'bizKey' | 'before')[], withHistory: boolean) => {
      const where = filters.length ? `WHERE ${filters.map((f) => LIST_FILTERS[f]).join(' AND ')}` : '';
      // In a UNION each part must be told its index: left to itself it sorted the whole table.
      const newest = (from: string, index: string): string =>
        `(SELECT ${COLUMNS} FROM ${from} FORCE INDEX (${index}) ${where} ORDER BY created_at DESC, id DESC LIMIT ?)`;
      return withHistory
        ? `${newest(table, 'idx_created')} UNION ALL ${newest(history, 'idx_h_created')}
           ORDER BY created_at DESC, id DESC LIMIT ?`
        : newest(table, 'idx_created');
    },
    counts: `SELECT status, type, SUM(count) AS count FROM (
         SELECT status, type, COUNT(*) AS count FROM ${table} GROUP BY status, type
         UNION ALL SELECT status, type, COUNT(*) AS count FROM ${history} GROUP BY status, type
       ) AS c GROUP BY status, type ORDER BY status, type`,
    oldestDue: `SELECT MIN(next_run_at) AS oldest FROM ${table} WHERE status = 'PENDING' AND next_run_at <= ?`,
    /**
     * Dead letters counted up to a limit (?1) and the oldest due PENDING time at now (?2), both
     * from status-leading indexes: the probe reads at most ?1 + 1 index entries however big the
     * table is.
     */
    healthProbe: `
      SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM ${table} WHERE status = 'DEAD' LIMIT ?) AS dead) AS dead_letters,
             (SELECT MIN(next_run_at) FROM ${table} WHERE status = 'PENDING' AND next_run_at <= ?) AS oldest`,
    /** One status at a time: (status, finished_at) then serves the order without sorting every match. */
    purge: `DELETE FROM ${table} WHERE status = ? AND finished_at < ? ORDER BY finished_at LIMIT ?`,
    /** The history's rows past the cutoff that no dropped partition took (it holds SUCCESS only). */
    purgeHistory: `DELETE FROM ${history} WHERE finished_at < ? ORDER BY finished_at LIMIT ?`,
    /**
     * purge and purgeHistory while edges or workflow steps exist: the batch's ids read and locked
     * first, so that the same transaction deletes those rows and the links of exactly them.
     */
    purgeIds: `SELECT id FROM ${table} WHERE status = ? AND finished_at < ? ORDER BY finished_at LIMIT ? FOR UPDATE`,
    purgeHistoryIds: `SELECT id FROM ${history} WHERE finished_at < ? ORDER BY finished_at LIMIT ? FOR UPDATE`,
    purgeByIds: `DELETE FROM ${table} WHERE id IN (?)`,
    purgeHistoryByIds: `DELETE FROM ${history} WHERE id IN (?)`,
    anyLinks: anyLinksSql(t),
    /** The edges (as dependant, as dependency) and workflow steps of purged commands, by id. */
    purgeLinks: commandLinks(t).map(
      ({ table: links, column }) => `DELETE FROM ${links} WHERE ${column} IN (?)`,
    ),
    /**
     * Outcomes finished in [?, ?) by status and latency bucket (how many of the `bounds` latency
     * bounds, bound in microseconds, are ≤ the latency), from the (status, finished_at) index.
     */
    outcomeCounts: (bounds: number) =>
      `SELECT status, latency_bucket, COUNT(*) AS count FROM (
         SELECT status, ${
           Array.from(
             { length: bounds },
             () => '(? <= TIMESTAMPDIFF(MICROSECOND, created_at, finished_at))',
           ).join(' + ') || '0'
         } AS latency_bucket
         FROM (SELECT status, created_at, finished_at FROM ${table}
               WHERE status IN ('SUCCESS', 'DEAD') AND finished_at >= ? AND finished_at < ?
               UNION ALL SELECT status, created_at, finished_at FROM ${history}
               WHERE finished_at >= ? AND finished_at < ?) AS finished) AS outcome
       GROUP BY status, latency_bucket
       ORDER BY status, latency_bucket`,
  };
}

const LIST_FILTERS = {
  status: 'status IN (?)',
  type: 'type = ?',
  bizKey: 'biz_key = ?',
  /** Below the cursor's (created_at, id); bound: its time twice, then its id. */
  before: '(created_at < ? OR (created_at = ? AND id < ?))',
} as const;

export type MysqlSql = ReturnType<typeof mysqlSql>;
