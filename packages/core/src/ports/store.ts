import { LIMITS } from '../limits.js';
import type * as E from 'fp-ts/lib/Either.js';
import type {
  ClaimedCommand,
  ClaimRef,
  CommandId,
  CommandRecord,
  CompletedAttempt,
  NewCommand,
  ProgressReport,
} from '../command.js';
import type { CommandNotFoundError, IdempotencyConflictError } from '../errors.js';
import type { CommandStatus } from '../status.js';
import type { SqlExecutor } from './sql-executor.js';
import type { CleanupHorizonProbe } from './cleanup-horizon.js';
import type { FailureOutcome, TransitionError } from '../transitions.js';
import type { MigrationScript, MigrationScriptOptions } from './migrations.js';
import type { ScheduleStore } from './schedules.js';
import type { KeyLimitStore, KeyRateLimitStore } from './key-limits.js';
import type { RateLimitStore } from './rate-limits.js';
import type { DependencyStore } from './dependencies.js';
import type { SubmitWindowStore } from './submit-windows.js';

/**
 * The command store: every database operation asynccmd needs, named by intent. One adapter per
 * database implements it; the conformance suite (packages/store-conformance) is its executable
 * contract, and every adapter must pass it unchanged against a real server.
 *
 * `Tx` is the adapter's handle on the caller's transaction (a better-sqlite3 Database, a pg
 * PoolClient, a mysql2 connection): submits run on it so they commit or roll back with the caller's
 * business writes. Every other operation runs on the store's own connections.
 *
 * Time: due times (`nextRunAt`, `now` parameters) are the application's clock; leases
 * (`leaseUntil`) and `updatedAt` are the database's clock, so instances with skewed clocks never
 * misjudge a live command as hung.
 */
export interface CommandStore<Tx = unknown> {
  /** 'sqlite' | 'postgres' | 'mysql' — for logs and metrics labels only; never branch on it. */
  readonly dialect: string;
  /** What this store can do beyond the port's operations; the runtime asks here, never by dialect. */
  readonly capabilities: StoreCapabilities<NoInfer<Tx>>;

  /** Creates or upgrades the schema. Idempotent; safe to run from two processes at once. */
  migrate(): Promise<void>;

  /**
   * The DDL `migrate()` would run here, without running it: the versions this database lacks (all
   * of them with `all`). Reads only which versions are applied (and, where the DDL depends on it,
   * what the server supports).
   */
  migrationScript?(options?: MigrationScriptOptions): Promise<MigrationScript>;

  /**
   * Runs `fn` in a transaction on a connection of the store's and commits, or rolls back if `fn`
   * throws (and rethrows). The runtime's `client.transaction` builds after-commit dispatch on it.
   */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;

  /**
   * Inserts commands as PENDING inside the caller's transaction, in order; returns their ids in
   * the same order. One statement for the whole batch where the dialect allows. A bizKey here is
   * for tracing only: it never blocks and is never blocked by an idempotent submit.
   * `tx` may be an SqlExecutor where `capabilities.sqlExecutor` says so.
   */
  insert(tx: Tx | SqlExecutor, commands: readonly NewCommand[]): Promise<CommandId[]>;

  /**
   * Inserts a command unless an unfinished (PENDING or RUNNING) idempotent command with the same
   * (type, bizKey) exists; then returns that command's id with `duplicate: true`. Atomic under
   * concurrency (a unique index, not check-then-insert): of N concurrent calls, exactly one inserts.
   * The bizKey is required.
   *
   * With `options.onPending` 'replace' or 'replace-keep-run-at', a holder that is still PENDING
   * takes this command's contents instead (see OnPending), in the same atomic write: of N
   * concurrent replacing calls, one inserts (or all replace) and the last to write wins; the
   * answer then says `replaced: true`. A RUNNING holder is never changed (`replaced: false`).
   */
  insertIdempotent(
    tx: Tx | SqlExecutor,
    command: NewCommand & { readonly bizKey: string },
    options?: IdempotentInsertOptions,
  ): Promise<InsertResult>;

  /**
   * Claims up to `limit` PENDING commands of the given types whose nextRunAt ≤ `now`, most urgent
   * first (ordered by priority, lowest number first, then nextRunAt, then id), marking them RUNNING with `token`, startedAt = database
   * now and leaseUntil = database now + leaseMs. Concurrent claimers never receive the same row.
   * Returns the claimed rows in claim order (possibly fewer than `limit`, possibly none).
   */
  claimDue(params: ClaimDueParams): Promise<ClaimedCommand[]>;

  /**
   * Claims one command by id, as claimDue would, if it is PENDING, due at `now` and of one of
   * `types` (when given); else returns null (someone else got it, or it is not claimable).
   */
  claimById(params: ClaimByIdParams): Promise<ClaimedCommand | null>;

  /**
   * Extends the leases of the RUNNING commands held by these claims to database now + leaseMs,
   * in one statement. Returns the refs whose claim is still valid: a missing one was taken away.
   */
  heartbeat(refs: readonly ClaimRef[], leaseMs: number): Promise<ClaimRef[]>;

  /**
   * Stores each report's progress on its command, read back as the record's `progress`, if its
   * claim still holds the command (RUNNING under that token), in one statement; a report of a
   * claim taken away changes nothing. Of two reports of one claim, the later in the list wins.
   * Every report is checked (`done` and `total` whole, 0 ≤ done ≤ total, total ≥ 1; see
   * core requireProgress) before anything is written: INVALID_ARGUMENT otherwise. Returns the ids
   * whose progress was written, each once.
   */
  reportProgress(reports: readonly ProgressReport[]): Promise<CommandId[]>;

  /**
   * RUNNING → SUCCESS for each ref whose token still holds the command, in one statement; sets
   * finishedAt and clears lastError (earlier errors stay in the history, where the attempt shows as
   * `succeeded`, read from the row: see core readAttemptHistory). Returns the ids that were
   * completed; the others were fenced out (a stale executor never overwrites a newer outcome).
   * A ref whose command is already SUCCESS under that same claim (a retried complete whose first
   * try landed, its reply lost) counts as completed and changes nothing. An attempt with a
   * `resultJson` stores it as the command's result (at most MAX_RESULT_BYTES; longer, or not a
   * string, is INVALID_ARGUMENT before anything is written); one without leaves the result null.
   */
  complete(attempts: readonly CompletedAttempt[]): Promise<CommandId[]>;

  /**
   * Writes failed attempts' outcomes (from core `decideFailure`): PENDING with the retry time, or
   * DEAD (finishedAt set) — many at once, in one statement where the database allows, each fenced by
   * its own claim token — and appends each as a `failed` (or `dead`) attempt with its error. Returns the ids whose outcome was written, in the attempts' order, each
   * once; the others were fenced out. Every outcome is checked before anything is written. An
   * attempt whose outcome (status and retry count) is already on the row under that same claim (a
   * retried fail whose first try landed) counts as written and changes nothing.
   */
  fail(attempts: readonly FailedAttempt[]): Promise<CommandId[]>;

  /**
   * RUNNING → PENDING for claims that were never started (shutdown), counting nothing against
   * them and keeping their nextRunAt. Returns the ids released.
   */
  release(refs: readonly ClaimRef[]): Promise<CommandId[]>;

  /**
   * Lets go of claims a requeue took away, once their executors have stopped: each command a
   * requeue holds back for one of them (see `requeue`) can be claimed at once. A ref that holds
   * nothing back (its command was claimed again, killed or is done) changes nothing. Returns the
   * ids let go, each once.
   */
  releaseRevoked(refs: readonly ClaimRef[]): Promise<CommandId[]>;

  /**
   * Takes back up to `limit` RUNNING commands whose lease expired on the database clock:
   * → PENDING with rescueCount + 1, keeping its nextRunAt (an orphan keeps its place in the queue),
   * or → DEAD once the rescues since the latest admin retry would exceed `maxRescues`; the attempt
   * goes into the history as `lease_expired` (or `dead`).
   * Guarded by status and lease, so a command that completed or heartbeat meanwhile is untouched.
   */
  reclaimHung(params: ReclaimParams): Promise<ReclaimedCommand[]>;

  /**
   * Admin: DEAD → PENDING with fresh attempts, due `now`: retryCount and rescueCount are kept, and
   * the retry budget and rescue limit count from them (retryCountAtRetry, rescueCountAtRetry).
   */
  retry(id: CommandId, now: Date): Promise<E.Either<AdminError, CommandRecord>>;
  /**
   * Admin: RUNNING → PENDING (a hung command forced back), due `now`; the old claim is fenced out
   * and its attempt recorded as `requeued`. Its executor may still be running, so no claim takes
   * the command until the old claim's holder lets go (`releaseRevoked`) or the old lease runs out
   * on the database clock: it never runs twice at once because of a requeue. Where the store has
   * `revocations`, the holder hears of it at once; elsewhere at its next heartbeat.
   */
  requeue(id: CommandId, now: Date): Promise<E.Either<AdminError, CommandRecord>>;
  /**
   * Admin: PENDING | RUNNING | DEAD → CANCELLED; `reason` becomes lastError when given. A running
   * attempt goes into the history as `killed`, and its holder hears of it through `revocations`
   * (where the store has them) or at its next heartbeat.
   */
  kill(id: CommandId, reason?: string): Promise<E.Either<AdminError, CommandRecord>>;
  /** Admin: PENDING → CANCELLED only (refused once started). */
  cancel(id: CommandId, reason?: string): Promise<E.Either<AdminError, CommandRecord>>;

  get(id: CommandId): Promise<CommandRecord | null>;
  getMany(ids: readonly CommandId[]): Promise<CommandRecord[]>;
  /**
   * Filtered listing, newest first by creation time (createdAt, then id, descending), paged by an
   * opaque cursor; a cursor this store did not hand out is refused with INVALID_ARGUMENT.
   */
  list(query: ListQuery): Promise<ListPage>;
  /** Counts by (status, type), and the nextRunAt of the oldest due PENDING command. */
  stats(now: Date): Promise<StoreStats>;
  /**
   * What a health check needs, read from indexes so it costs the same at millions of rows (unlike
   * `stats`, which counts everything): the DEAD commands counted up to `deadLetterLimit` and never
   * further, and the nextRunAt of the oldest PENDING command due at `now`.
   */
  healthProbe(params: HealthProbeParams): Promise<HealthProbe>;
  /**
   * The commands that reached SUCCESS or DEAD with finishedAt in [from, to) (database clock),
   * counted by status and by how long each took from submit to that outcome (finishedAt −
   * createdAt, in milliseconds): `latencyBucket` is how many of `latencyBoundsMs` are ≤ that time.
   * Only rows with a count are returned, ordered by status and bucket. Read from an index on
   * finishedAt, so it costs the rows finished in the range, never the whole table.
   */
  outcomeCounts(params: OutcomeCountParams): Promise<OutcomeCount[]>;
  /**
   * Deletes up to `limit` finished commands (finishedAt < olderThan) with the given statuses
   * (default SUCCESS and CANCELLED; DEAD only when listed), and with them their dependency edges
   * (as dependant and as dependency) and workflow steps. Returns the number of commands deleted;
   * call again until it returns less than `limit`. Rows are deleted at most `limit` a call; a store
   * that keeps finished commands in time partitions also drops each partition wholly before
   * `olderThan` in one step, whatever it holds, and counts its rows: only then is the answer above
   * `limit`.
   */
  purge(params: PurgeParams): Promise<number>;
  /** The database clock. */
  now(): Promise<Date>;
  /** Cheap round trip for health checks. Rejects when the database cannot be reached. */
  ping(): Promise<void>;

  /** Cross-process wake-ups, where the database has them (Postgres LISTEN/NOTIFY). */
  readonly wakeups?: WakeupChannel;

  /**
   * Where the database can tell: the claims an admin requeue or kill takes away from a RUNNING
   * command, announced to every instance as the admin write commits (Postgres NOTIFY), so the one
   * holding it aborts the execution at once instead of at its next heartbeat.
   */
  readonly revocations?: RevocationChannel;

  /**
   * Recurring schedules and the once-per-tick insert of their commands, where the adapter has them
   * (every adapter of this repository does; the runtime refuses `recurring` without them).
   */
  readonly schedules: ScheduleStore;

  /**
   * The per-type limits of RUNNING commands kept in the database (`<table>_type_limits`), where the
   * adapter has them (every adapter of this repository does; the runtime refuses `typeLimits`
   * without them). Claims honour a type's limit only when they name it in `limitedTypes`.
   */
  readonly typeLimits: TypeLimitStore;

  /**
   * The per-type rate limits kept in the database (`<table>_rate_limits`, one token bucket per
   * type), where the adapter has them (every adapter of this repository does; the runtime refuses
   * `rateLimits` without them). The store only keeps the buckets: the runtime takes a type's tokens
   * before it claims the type.
   */
  readonly rateLimits: RateLimitStore;

  /**
   * The per-key limits of RUNNING commands kept in the database (`<table>_key_limits`), where the
   * adapter has them (every adapter of this repository does; the runtime refuses `keyLimits`
   * without them). Claims honour a type's key limit only when they name it in `keyedTypes`.
   */
  readonly keyLimits: KeyLimitStore;

  /**
   * The per-key rate limits kept in the database (`<table>_key_rate_limits`, a token bucket per
   * key in `<table>_key_rate_buckets`), where the adapter has them (every adapter of this
   * repository does). Claims honour them only for the types they name in `keyRatedTypes`.
   */
  readonly keyRateLimits: KeyRateLimitStore;

  /**
   * The types paused for every instance (`<table>_paused_types`), where the adapter has them
   * (every adapter of this repository does). The store only keeps the rows: the runtime leaves a
   * paused type out of its claims. Submits of a paused type are accepted as always.
   */
  readonly typePauses: TypePauseStore;

  /**
   * Where the database can tell: what keeps it from cleaning up the command table's dead row
   * versions (a long transaction elsewhere), read for health, metrics and a warning in the log.
   */
  readonly cleanupHorizon?: CleanupHorizonProbe;

  /**
   * Completion inside a transaction of the store's own `transaction()`, for executors whose writes
   * must commit with their SUCCESS, where the adapter has it (every adapter of this repository
   * does; the runtime refuses transactional executors without it).
   */
  readonly transactionalCompletion: TransactionalCompletion<NoInfer<Tx>>;

  /**
   * Commands that wait for other commands, and workflows (`<table>_dependencies`,
   * `<table>_workflow_steps`), where the adapter has them (every adapter of this repository does;
   * the runtime's workflow builder refuses a store without them). See docs/workflows.md.
   */
  readonly dependencies: DependencyStore<NoInfer<Tx>>;

  /**
   * The windows of leading-edge throttles (`<table>_submit_windows`), where the adapter has them
   * (every adapter of this repository does). See docs/flow-control.md.
   */
  readonly submitWindows: SubmitWindowStore<NoInfer<Tx>>;

  /** Closes the store's own connections (never the caller's). */
  close(): Promise<void>;
}

/**
 * The fenced SUCCESS of one attempt written in the caller's transaction, so that the writes made
 * in that transaction (the executor's own rows, the commands it submitted) and the command's
 * SUCCESS commit together, or not at all.
 */
export interface TransactionalCompletion<Tx = unknown> {
  /**
   * RUNNING → SUCCESS of `attempt`'s command, fenced by its claim token, as one statement on `tx`
   * (a transaction this store's `transaction()` opened and has not committed): it becomes visible
   * with that transaction's COMMIT and is undone by its rollback. Stores the attempt's
   * `resultJson` as `complete` does (checked the same way, before anything is written). True when
   * the claim still held: the row is now locked by `tx` until it ends, so no other claim, heartbeat
   * or admin write can change it before the COMMIT. False when the claim was taken away (reclaimed,
   * requeued, killed) or the command already finished: nothing was written, and the caller must
   * roll `tx` back, or the stale attempt's other writes would commit. `tx` may be an SqlExecutor
   * (an ORM's transaction on the store's database) where `capabilities.sqlExecutor` says so and the
   * adapter can complete through one (PostgreSQL's and MySQL's can; SQLite's refuses it).
   */
  complete(tx: Tx | SqlExecutor, attempt: CompletedAttempt): Promise<boolean>;
  /**
   * Optional: `complete`'s statement sent with `tx`'s COMMIT, in the same round trip, instead of
   * now. True when it will be: the caller commits as it would after `complete` answered true, and
   * the commit decides — it lands the SUCCESS with the transaction's other writes, or it fails with
   * an error `claimLost` recognises (the claim was taken away: nothing was committed), or with any
   * other error as a COMMIT can. False when it cannot for this `tx` (not a transaction this store's
   * `transaction()` opened and holds statements for): then call `complete`. Nothing is sent either way.
   */
  completeAtCommit?(tx: Tx | SqlExecutor, attempt: CompletedAttempt): boolean;
  /** Whether `error`, from the COMMIT of a transaction `completeAtCommit` answered true for, means the claim was taken away. */
  claimLost?(error: unknown): boolean;
  /**
   * `complete` takes an SqlExecutor over an ORM's transaction on the store's database, so
   * executors whose transaction an ORM bridge opens can run on this store. Absent: it does not.
   */
  readonly throughSqlExecutor?: boolean;
  /**
   * Whether the command is SUCCESS under this claim, read on the store's own connections: what
   * settles a COMMIT whose answer was lost (the connection died during it). True: the transaction
   * committed; false: it did not, and never will.
   */
  succeededUnder(ref: ClaimRef): Promise<boolean>;
  /**
   * Whether `error`, thrown while such a transaction was open (opening it, a statement in it, its
   * COMMIT), means the transaction was lost through no fault of its statements: the connection
   * died, the server shut down, the database chose it as a deadlock (or, on Galera, a
   * certification) victim, or it could not be opened because other writers held the database
   * (SQLite's busy timeout). Such an attempt is put back to run again at once, not counted as a
   * failure. Never true for an error of a statement itself (a constraint, bad SQL).
   */
  isTransient(error: unknown): boolean;
  /**
   * Optional: savepoints in a transaction this store's `transaction()` opened, so that several
   * attempts share one transaction and one COMMIT, each undone alone. Absent: one transaction per
   * attempt.
   */
  readonly savepoints?: AttemptSavepoints<Tx>;
}

/**
 * Savepoints for attempts that share a store transaction (TransactionalCompletion.savepoints).
 * Names are SQL identifiers the caller makes up: lower-case letters, digits and underscores.
 */
export interface AttemptSavepoints<Tx = unknown> {
  /** Opens savepoint `name` in `tx`; it may go out with `tx`'s next statement. */
  open(tx: Tx, name: string): Promise<void>;
  /** Undoes `tx` back to savepoint `name`: every write since, and every savepoint opened after it. */
  rollbackTo(tx: Tx, name: string): Promise<void>;
  /**
   * `complete` of each attempt in `tx`, fenced by its claim token, as few statements as the store
   * can: the ids completed, in the attempts' order. An attempt left out was fenced out (its claim
   * taken away): the caller must undo it before `tx` commits.
   */
  completeAll(tx: Tx, attempts: readonly CompletedAttempt[]): Promise<CommandId[]>;
  /**
   * Optional: whether a statement in `tx` failed and left it refusing every statement until it is
   * rolled back (PostgreSQL), as far as the store knows now: an attempt that caught such an error
   * and returned is undone to its savepoint as failed, instead of failing the attempts after it.
   * Settles once the store has heard the end of what `tx` has sent.
   */
  failed?(tx: Tx): Promise<boolean>;
}

/** A failed attempt to record: the claim it ran under and what it turns into. */
export interface FailedAttempt {
  readonly ref: ClaimRef;
  readonly outcome: FailureOutcome;
}

export interface StoreCapabilities<Tx = unknown> {
  /** Claims skip rows locked by other claimers instead of waiting on them. */
  readonly skipLocked: boolean;
  /** `wakeups` is present and delivers notifications between processes. */
  readonly wakeups: boolean;
  /** `revocations` is present: a requeue or kill reaches the holding instance at once. */
  readonly revocations: boolean;
  /**
   * Work that can go out with the COMMIT of a transaction the store's `transaction()` opened, in
   * the commit's round trip (PostgreSQL pipelines it); null where the store has no such path, and
   * then the runtime does the same work after commit.
   */
  readonly commitRiding: CommitRiding<Tx> | null;
  /** `insert` and `insertIdempotent` also accept an SqlExecutor (an ORM's transaction). */
  readonly sqlExecutor: boolean;
}

/**
 * What rides on a store transaction's COMMIT: still after COMMIT, in a transaction of its own, but
 * in the commit's round trip. Each applies only to a transaction this store's `transaction()`
 * opened and has not yet committed; for any other it declines, and the caller does the work after
 * commit.
 */
export interface CommitRiding<Tx = unknown> {
  /**
   * The store's claimById, run right after `tx` commits. Returns null when it declines (`tx` is not
   * such a transaction, or already carries a claim); then the caller uses claimById after commit.
   * The promise settles once the transaction is over: the claimed command, or null (not
   * claimable, or `tx` did not commit); it rejects when the claim itself failed (the command is
   * still PENDING for the poll loop). Never await it (or return it) inside the transaction: it
   * settles only after COMMIT.
   */
  claimById(tx: Tx, params: ClaimByIdParams): Promise<ClaimedCommand | null> | null;
  /**
   * Asks for the announcement of work submitted in `tx` (the wake-up `wakeups.notify()` would send)
   * to go out with its commit, coalesced like notify; nothing is sent if the commit fails. Returns
   * false when it declines, and then the caller calls `wakeups.notify()` after commit.
   */
  notify(tx: Tx): boolean;
}

export interface InsertResult {
  readonly id: CommandId;
  /** True when an unfinished command with the same (type, bizKey) already existed. */
  readonly duplicate: boolean;
  /**
   * True when that existing command was PENDING and took this submit's contents (onPending
   * 'replace' or 'replace-keep-run-at'). False on an insert, with 'keep', and when the existing
   * command was RUNNING: its executor has already read the old payload, so nothing was changed.
   */
  readonly replaced: boolean;
}

/**
 * What an idempotent submit does when its (type, bizKey) is held by a command that is still
 * PENDING (a RUNNING holder is never changed):
 * - 'keep': nothing; the holder stays as it is (the default).
 * - 'replace': the holder takes the submit's payload, headers, priority, maxRetry and due time
 *   (runAt, default now): each submit pushes the run back, a debounce.
 * - 'replace-keep-run-at': as 'replace', but the holder keeps its due time (a throttle: it runs
 *   when first due, with the latest contents).
 * A replaced command keeps its id, createdAt, owner, ordering key (and its place under that key),
 * history and retry counters: one waiting for a retry (retryCount > 0) is still PENDING, so it is
 * replaced too and keeps its retryCount; with 'replace' its retry's due time becomes the submit's.
 */
export type OnPending = 'keep' | 'replace' | 'replace-keep-run-at';

export const ON_PENDING_CHOICES: readonly OnPending[] = ['keep', 'replace', 'replace-keep-run-at'];

export interface IdempotentInsertOptions {
  /** Default 'keep'. */
  readonly onPending?: OnPending;
}

export interface ClaimDueParams {
  readonly types: readonly string[];
  /**
   * Those of `types` whose stored limit (see `typeLimits`) this claim honours. For each, in a
   * transaction of its own, the claim locks the type's limit row, counts its RUNNING commands (in a
   * statement that sees every claim committed before the lock was granted) and takes at most the
   * free places; a listed type without a stored limit is not claimed at all. Limited types are
   * claimed first, then the other types fill what is left of `limit`, each part in claim order.
   * Absent or empty: the claim is exactly the one without limits (no lock, no count).
   */
  readonly limitedTypes?: readonly string[];
  /**
   * Those of `types` whose stored key limit (see `keyLimits`) this claim honours: each alone, in a
   * transaction of its own that locks the type's key-limit row, counts its RUNNING commands per key
   * and claims, in claim order, only commands whose key has a free place (a command whose payload
   * lacks the key field is not held by it); a listed type without a stored key limit is not claimed.
   * Claimed before the other types. A type may not be in both `limitedTypes` and `keyedTypes`.
   * Absent or empty: the claim is exactly the one without them. claimById ignores key limits.
   */
  readonly keyedTypes?: readonly string[];
  /**
   * Those of `types` whose stored per-key rate limit (see `keyRateLimits`) this claim honours:
   * each alone, first, in a transaction of its own that locks the type's row, refills the buckets
   * of the due commands' keys on the database clock and claims, in claim order, only as many of a
   * key as its bucket holds whole tokens, spending them (a command without the key field is not
   * held). A listed type without a stored limit is not claimed. A type may be in only one of
   * `limitedTypes`, `keyedTypes` and `keyRatedTypes`. Absent or empty: the claim without them.
   */
  readonly keyRatedTypes?: readonly string[];
  readonly limit: number;
  readonly now: Date;
  readonly token: string;
  readonly leaseMs: number;
  /** Who claims (a runtime instance; at most LIMITS.instanceChars characters): recorded as claimedBy and in the history. */
  readonly instance?: string;
}

export interface ClaimByIdParams {
  readonly id: CommandId;
  readonly now: Date;
  readonly token: string;
  readonly leaseMs: number;
  readonly types?: readonly string[];
  /** As in ClaimDueParams. */
  readonly instance?: string;
  /**
   * As in ClaimDueParams: a command of one of these types is claimed only within its limit (else
   * null, and it stays PENDING). Non-empty, it costs a look-up of the command's type first, and a
   * store's commit-riding claimById declines.
   */
  readonly limitedTypes?: readonly string[];
}

/** The most RUNNING commands a type limit allows. */
export const MAX_TYPE_LIMIT = LIMITS.typeLimit;

/** A type's limit of RUNNING commands, as stored. */
export interface TypeLimit {
  readonly type: string;
  /** 1..MAX_TYPE_LIMIT. */
  readonly maxRunning: number;
}

/** The `<table>_type_limits` rows: one per limited type, shared by every instance. */
export interface TypeLimitStore {
  /**
   * Stores each given limit, replacing the type's stored one (the last declaration wins for every
   * instance, whose claims read the row); rows of other types stay. A limit that is not an integer
   * in 1..MAX_TYPE_LIMIT, or a bad type name, is refused (INVALID_ARGUMENT) before anything is written.
   */
  declare(limits: readonly TypeLimit[]): Promise<void>;
  /** Every stored limit, by type. */
  list(): Promise<TypeLimit[]>;
}

/** The longest reason a type pause keeps. */
export const MAX_PAUSE_REASON_CHARS = LIMITS.pauseReasonChars;

/** A type paused for every instance, as stored. */
export interface PausedType {
  readonly type: string;
  /** When it was paused, on the database clock. */
  readonly pausedAt: Date;
  /** What the person who paused it said; null when nothing. */
  readonly reason: string | null;
}

/**
 * The `<table>_paused_types` rows: one per paused type, shared by every instance. A type name is
 * 1..MAX_LIMITED_TYPE_CHARS characters without NUL, a reason at most MAX_PAUSE_REASON_CHARS
 * without NUL; anything else is refused (INVALID_ARGUMENT) before anything is written. The type
 * need not be one this process knows: another service may execute it.
 */
export interface TypePauseStore {
  /** Pauses `type`; false when it was paused already (its time and reason stay as they were). */
  pause(type: string, reason?: string | null): Promise<boolean>;
  /** Resumes `type`; false when it was not paused. */
  resume(type: string): Promise<boolean>;
  /** Every paused type, by name. */
  list(): Promise<PausedType[]>;
}

export interface ReclaimParams {
  readonly limit: number;
  readonly maxRescues: number;
}

export interface ReclaimedCommand {
  readonly id: CommandId;
  readonly type: string;
  readonly status: 'PENDING' | 'DEAD';
}

export type AdminError = TransitionError | CommandNotFoundError | IdempotencyConflictError;

export interface ListQuery {
  readonly status?: CommandStatus | readonly CommandStatus[];
  readonly type?: string;
  readonly bizKey?: string;
  /** From a previous page's nextCursor. */
  readonly cursor?: string;
  /** 1..1000; default 50. */
  readonly limit?: number;
}

export interface ListPage {
  readonly items: CommandRecord[];
  /** Pass as `cursor` for the next page; null on the last page. Stable under concurrent inserts. */
  readonly nextCursor: string | null;
}

export interface StatsRow {
  readonly status: CommandStatus;
  readonly type: string;
  readonly count: number;
}

export interface StoreStats {
  readonly counts: StatsRow[];
  /** nextRunAt of the oldest PENDING command that is due at `now`; null when none is waiting. */
  readonly oldestDueAt: Date | null;
}

/** The largest `deadLetterLimit` a health probe takes: beyond it, a probe would no longer be cheap. */
export const MAX_HEALTH_PROBE_DEAD_LETTERS = LIMITS.healthProbeDeadLetters;

export interface HealthProbeParams {
  readonly now: Date;
  /** 1..MAX_HEALTH_PROBE_DEAD_LETTERS: dead letters are counted up to this many. */
  readonly deadLetterLimit: number;
}

export interface HealthProbe {
  /** DEAD commands, counted up to the probe's `deadLetterLimit`. */
  readonly deadLetters: number;
  /** nextRunAt of the oldest PENDING command that is due at `now`; null when none is waiting. */
  readonly oldestDueAt: Date | null;
}

/** The most latency bounds an outcome count takes. */
export const MAX_OUTCOME_LATENCY_BOUNDS = LIMITS.outcomeLatencyBounds;

export interface OutcomeCountParams {
  /** Inclusive. */
  readonly from: Date;
  /** Exclusive; not before `from`. */
  readonly to: Date;
  /** Ascending, whole milliseconds ≥ 0; up to MAX_OUTCOME_LATENCY_BOUNDS of them (none: one bucket). */
  readonly latencyBoundsMs: readonly number[];
}

export interface OutcomeCount {
  readonly status: 'SUCCESS' | 'DEAD';
  /** 0..latencyBoundsMs.length: how many bounds are ≤ the command's submit-to-outcome time. */
  readonly latencyBucket: number;
  readonly count: number;
}

export interface PurgeParams {
  readonly olderThan: Date;
  readonly statuses?: readonly ('SUCCESS' | 'CANCELLED' | 'DEAD')[];
  readonly limit: number;
}

/** A claim an admin write took away from a RUNNING command. */
export interface RevokedClaim {
  readonly ref: ClaimRef;
  readonly by: 'requeue' | 'kill';
}

/** Announcements of claims taken away, for the instances that may hold them. */
export interface RevocationChannel {
  /** Calls `onRevoked` for every claim taken away from now on; returns a function that stops listening. */
  subscribe(onRevoked: (revoked: RevokedClaim) => void): Promise<() => Promise<void>>;
}

/** Coalesced cross-process "there is new work" signals. */
export interface WakeupChannel {
  /** Delivers a call for each wake-up received; returns a function that stops listening. */
  subscribe(onWake: () => void): Promise<() => Promise<void>>;
  /** Announces new work. Called after commit; implementations coalesce bursts. */
  notify(): void;
}
