import type {
  BackoffPolicy,
  Clock,
  CommandStore,
  ExecutionInterceptor,
  Logger,
  SubmitHeadersProvider,
  TokenSource,
} from '@asynccmd/core';
import type { AnyExecutor } from './executor.js';
import type { RecurringSchedule } from './recurring/recurring-options.js';
import type { CleanupWatchOptions } from './services/cleanup-watch.js';
import type { RetentionOptions } from './services/retention.js';
import type { PoolOptions } from './work-pool.js';
import type { RateLimitOptions } from './rate-limits.js';
import type { SubmitWindow } from './submit-windows.js';
import type { FairShareOptions, KeyLimitOptions, KeyRateLimitOptions } from './key-limits.js';

/**
 * Defaults: a dead instance's command is running again within about 9 s — its lease (8 s) runs out
 * at most 8 s after its last heartbeat, the next look for hung commands (≤ 1 s) reclaims it and
 * wakes the poll loop to claim it.
 * Heartbeats every 2 s leave a live command three missed beats of slack before it could be taken.
 */
export const DEFAULT_LEASE_MS = 8_000;
export const DEFAULT_POLL_INTERVAL_MS = 1_000;
export const DEFAULT_MAX_RETRY = 5;
export const DEFAULT_SHARED_POOL: PoolOptions = { concurrency: 8 };
export const DEFAULT_RECLAIM_BATCH_SIZE = 100;
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 30_000;

export interface AsyncCommandsOptions<Tx = unknown> {
  readonly store: CommandStore<Tx>;
  /** The command types this instance runs; it claims only these. */
  readonly executors: readonly AnyExecutor[];
  /** Types submitted here but executed by other processes (the client accepts them). */
  readonly submitOnlyTypes?: readonly string[];
  /** Application clock for due times and backoff. Default: the system clock. */
  readonly clock?: Clock;
  /** Claim tokens. Default: crypto.randomUUID. */
  readonly tokens?: TokenSource;
  /** pino-compatible. Default: silent. */
  readonly logger?: Logger;
  /** Wrap every execution (tracing, logging context), outermost first. */
  readonly interceptors?: readonly ExecutionInterceptor[];
  /** Headers stored with every submitted command (e.g. the W3C trace context). */
  readonly headersProvider?: SubmitHeadersProvider;
  /** Default `owner` column of submitted commands. */
  readonly owner?: string;
  /**
   * Names this instance in the claims it takes (a command's `claimedBy` and its attempt history),
   * 1 to 128 characters. Default: `<hostname>/<pid>/<random>`, different for every runtime.
   */
  readonly instanceId?: string;
  /** Largest payload accepted, as UTF-8 JSON bytes. Default: core DEFAULT_MAX_PAYLOAD_BYTES (64 KiB). */
  readonly maxPayloadBytes?: number;
  /**
   * Largest result an executor may leave with `ctx.setResult`, as UTF-8 JSON bytes, at most core
   * MAX_RESULT_BYTES (1 MiB). Default: core DEFAULT_MAX_RESULT_BYTES (64 KiB).
   */
  readonly maxResultBytes?: number;
  /**
   * Most transactional attempts (executors declared `transactional: true` on the store's own
   * transactions) that run one after another in one transaction when they wait in the same pool,
   * each in a savepoint of its own: one BEGIN, one fenced SUCCESS statement and one COMMIT for
   * all. A transaction takes no further attempt once open `transactionGroupMs`, and an attempt that
   * fails or loses its claim is undone alone (those after it run again). 1: every attempt has a
   * transaction of its own. Default and most 32.
   */
  readonly transactionGroupSize?: number;
  /**
   * How long a shared transaction (see `transactionGroupSize`) takes further attempts after its
   * BEGIN, in milliseconds: its first attempts' writes, row locks and SUCCESS wait for its COMMIT
   * up to about this long. Longer shares BEGIN and COMMIT among more attempts (most on SQLite, whose
   * one writer commits once per transaction). Default 20, 1 to 1000.
   */
  readonly transactionGroupMs?: number;
  /** Retries after the first attempt when neither the submit nor the executor says. Default 5. */
  readonly defaultMaxRetry?: number;
  /**
   * The priority of each command type's submits that name none (core PRIORITY_RANGE; lower is
   * claimed first). Types not listed: core DEFAULT_PRIORITY (0).
   */
  readonly typePriorities?: Readonly<Record<string, number>>;
  /**
   * At most this many commands of each listed type RUNNING at once, across every instance
   * (1..core MAX_TYPE_LIMIT), enforced by the claims in the database. Stored in
   * `<table>_type_limits` before this runtime's first claim of the type: the last instance to start
   * sets the value every instance's claims then read. Declare it on every instance that runs the type.
   */
  readonly typeLimits?: Readonly<Record<string, number>>;
  /**
   * At most `maxStarts` claims of each listed type in any window of `periodMs`, across every
   * instance: a token bucket per type in `<table>_rate_limits` (docs/flow-control.md), declared
   * before this runtime's first claim of the type (the last declaration wins). Commands over the
   * limit stay PENDING. Declare it on every instance that runs the type.
   */
  readonly rateLimits?: Readonly<Record<string, RateLimitOptions>>;
  /**
   * Debounce (`{ debounceMs }`) or throttle (`{ throttleMs, later?: 'drop' | 'merge', edge?: 'trailing' | 'leading' }`) windows of
   * each listed type, over a key (`key` function of the payload, or client.submitCoalesced's `key`
   * option): see docs/flow-control.md. Refused when longer than `retention.olderThanMs`.
   */
  readonly submitWindows?: Readonly<Record<string, SubmitWindow>>;
  /**
   * At most `maxRunning` commands of each listed type RUNNING at once per value of the payload
   * field `key` (e.g. `{ 'erp.call': { key: 'customerId', maxRunning: 5 } }`), across every
   * instance, enforced by the claims in the database (`<table>_key_limits`, the last declaration
   * wins; docs/flow-control.md). A type takes either this or `typeLimits`.
   */
  readonly keyLimits?: Readonly<Record<string, KeyLimitOptions>>;
  /**
   * At most `maxStarts` claims of each listed type in any window of `periodMs` per value of the
   * payload field `key`, across every instance: a token bucket per key in the database
   * (docs/flow-control.md; the last declaration wins). A type with one takes no other limit.
   */
  readonly keyRateLimits?: Readonly<Record<string, KeyRateLimitOptions>>;
  /**
   * Claims of each listed type take turns across the values of the payload field `key` (e.g. a
   * tenant): the key with the fewest RUNNING goes first within a priority, so a small tenant's
   * command is claimed in the next round even behind a big tenant's backlog (docs/flow-control.md).
   * Stored as a key limit that is never reached; a type takes either this or another limit.
   * `weights` ({ [key]: w }): a key of weight w takes w commands per turn (a weighted fair share).
   */
  readonly fairShare?: Readonly<Record<string, FairShareOptions>>;
  /** Retry delays when the executor has none. Default: core exponentialBackoff() — min(60 s·2ⁿ, 1 h). */
  readonly backoff?: BackoffPolicy;
  /**
   * Rewrites a failed attempt's error text before it is stored as lastError and in the history
   * (where every dashboard and admin API user reads it), logged and reported in events. Default:
   * core redactErrorText — URL passwords, `password=`-style pairs and bearer credentials become
   * `***`. Pass `(text) => text` to store the text as thrown. One that throws falls back to the default.
   */
  readonly redactError?: (text: string) => string;
  /** Lease of a claim, renewed by heartbeats; executors may override. Default 8 s. */
  readonly leaseMs?: number;
  /** Heartbeat period. Default: a quarter of the shortest lease. */
  readonly heartbeatIntervalMs?: number;
  /** Sleep between poll rounds that found nothing more to do. Default 1 s. */
  readonly pollIntervalMs?: number;
  /** The pool for ASYNC_POOL / IMMEDIATE types that name none. Default { concurrency: 8 } (an adaptive queue). */
  readonly sharedPool?: PoolOptions;
  /** Isolated pools, by the name executors give in `pool`. */
  readonly pools?: Readonly<Record<string, PoolOptions>>;
  /**
   * SCHEDULED commands claimed per round (run one after another in the loop). Default: adaptive,
   * as a pool's queue with one slot — the command the loop runs now and as many as it would run in
   * about two claim round trips (at most 500): fast commands come in large claims, slow ones one
   * per claim, so no instance holds work others could start. A number fixes it.
   */
  readonly scheduledBatchSize?: number;
  /**
   * The SCHEDULED types take turns in each claim round, as a pool's with `typeTurns` do: a type's
   * backlog no longer keeps the loop's other types waiting behind it. Default false (one claim
   * order over them all).
   */
  readonly scheduledTypeTurns?: boolean;
  /** Hung commands reclaimed per look (a full look looks again at once). Default 100. */
  readonly reclaimBatchSize?: number;
  /** Period of the look for hung commands, on its own timer. Default: `pollIntervalMs`. */
  readonly reclaimIntervalMs?: number;
  /** Lease expiries a command survives before it is declared DEAD. Default: core DEFAULT_MAX_RESCUES. */
  readonly maxRescues?: number;
  /**
   * Deletes finished commands on its own. Off unless given: a history is the application's to drop.
   * SUCCESS and CANCELLED commands (DEAD too with `includeDead`) that finished more than
   * `olderThanMs` ago on the database clock go, `batchSize` rows per DELETE (default 1000), at
   * start and then every `intervalMs` (default 1 h); stop() ends it. Every instance that has it
   * purges: give it to one, or to all (a purge of rows already gone deletes nothing).
   */
  readonly retention?: RetentionOptions;
  /**
   * Where the store can tell (PostgreSQL, MySQL/MariaDB): a warning in the log once a long
   * transaction, snapshot or prepared transaction elsewhere has kept the database from cleaning up
   * the command table for `warnAfterMs` (default 1 min), looked at every `intervalMs` (default
   * 1 min) by instances that claim; `false` turns it off.
   */
  readonly cleanupWatch?: CleanupWatchOptions | false;
  /**
   * Commands submitted on a cron schedule, once per tick across every instance that declares them
   * (see docs/recurring.md). Each instance enqueues the ticks; the table's (schedule, tick) key lets
   * exactly one insert through. Pause and resume them with `runtime.schedules`, the admin API or the
   * CLI.
   */
  readonly recurring?: readonly RecurringSchedule[];
}

export interface StopOptions {
  /** How long to wait for running commands. Default 30 s. */
  readonly timeoutMs?: number;
  /** Close the store at the end. Default true. */
  readonly closeStore?: boolean;
}
