/** Messages between the bench orchestrator (main) and its child processes (workers/*.js). */

/**
 * Which queue a child drives. Each kind names a system and where its tables live. asynccmd's
 * `typeLimit`: the runtime's `typeLimits` for the bench type (unset: none); its `mode`: the bench
 * executor's (unset: ASYNC_POOL on the shared pool of C; 'SCHEDULED', the mode of an executor that
 * names none: inline in the poll loop, one at a time); its `effect`: what the executor writes (see
 * EffectMode).
 */
export type SystemSpec =
  /** `queueSize`: the runtime pool's queue of claimed commands waiting for a slot (unset: the runtime's adaptive default). */
  | {
      readonly kind: 'asynccmd-pg';
      readonly schema: string;
      readonly queueSize?: number;
      readonly typeLimit?: number;
      readonly flow?: FlowUsage;
      readonly mode?: AsynccmdBenchMode;
      readonly effect?: EffectMode;
      /** The runtime's `transactionGroupMs` (unset: its default): a tuned row of the effect drains. */
      readonly transactionGroupMs?: number;
      /** The runtime's `retention` option (the soak): finished commands older than this go. */
      readonly retention?: { readonly olderThanMs: number; readonly intervalMs: number };
    }
  /**
   * `oneRoundTrip`: a submitter sends BEGIN, the INSERT (its payload as a literal) and COMMIT as one
   * simple query — the least any client can do for a one-command transaction. `effect`: the
   * consumer inserts each command's effect row and completes it in one transaction
   * (baselines/raw-effect-pg.ts), the reference of the transactional effect drain.
   */
  | {
      readonly kind: 'raw-pg';
      readonly schema: string;
      readonly batch: number;
      readonly oneRoundTrip?: boolean;
      readonly effect?: 'transactional';
    }
  /** The lean bare loop (baselines/layouts-pg.ts): the physical reference of a PostgreSQL queue. */
  | { readonly kind: 'lean-pg'; readonly schema: string; readonly batch: number }
  /**
   * `performance`: the settings graphile-worker's Performance page advises (localQueue.size 500,
   * completeJobBatchDelay 0, failJobBatchDelay 0); otherwise its defaults. `effect`: its task
   * inserts one row into EFFECT_TABLE through `helpers.query` (its own transaction).
   */
  | {
      readonly kind: 'graphile';
      readonly schema: string;
      readonly performance: boolean;
      readonly effect?: boolean;
    }
  /** pg-boss with batched fetches of `batchSize`, LISTEN/NOTIFY wake-ups and burst fetching. */
  | {
      readonly kind: 'pg-boss';
      readonly schema: string;
      readonly batchSize: number;
      /**
       * The soak: its maintenance on (`supervise`), deleting completed jobs after this many seconds
       * (the queue's `deleteAfterSeconds`, set where the queue is created).
       */
      readonly maintained?: boolean;
    }
  /** Sidequest in-process (inline runner, no fork) on MySQL/MariaDB, polling every `pollMs`. */
  | { readonly kind: 'sidequest'; readonly database: string; readonly pollMs: number }
  | {
      readonly kind: 'asynccmd-sqlite';
      readonly filename: string;
      readonly typeLimit?: number;
      readonly flow?: FlowUsage;
      readonly mode?: AsynccmdBenchMode;
      readonly effect?: EffectMode;
      /** The runtime's `transactionGroupMs` (unset: its default): a tuned row of the effect drains. */
      readonly transactionGroupMs?: number;
    }
  /** `batch` rows per `UPDATE … RETURNING` claim, completed in one statement. */
  | { readonly kind: 'raw-sqlite'; readonly filename: string; readonly batch: number }
  | {
      readonly kind: 'asynccmd-mysql';
      readonly database: string;
      readonly claimStrategy: 'skip-locked' | 'legacy';
      readonly typeLimit?: number;
      readonly flow?: FlowUsage;
      readonly mode?: AsynccmdBenchMode;
      readonly effect?: EffectMode;
      /** The runtime's `transactionGroupMs` (unset: its default): a tuned row of the effect drains. */
      readonly transactionGroupMs?: number;
      /** The runtime's `retention` option (the soak). */
      readonly retention?: { readonly olderThanMs: number; readonly intervalMs: number };
    }
  | { readonly kind: 'raw-mysql'; readonly database: string; readonly batch: number };

/**
 * A flow limit the consumer's runtime runs the bench type with (scenarios/usage.ts): a rate limit
 * never reached, fair share by the payload's tenant, or a limit of RUNNING per tenant.
 */
export type FlowUsage = 'rate limit' | 'fair share' | 'key limit';

/** The bench executor's mode when not ASYNC_POOL (see SystemSpec). */
export type AsynccmdBenchMode = 'SCHEDULED';

/**
 * What asynccmd's bench executor writes besides recording the run (unset: nothing, the no-op): one
 * row into EFFECT_TABLE, in the attempt's transaction with its SUCCESS (a transactional executor,
 * `ctx.tx`), or in a transaction of its own on a pool of its own before the runtime writes SUCCESS.
 */
export type EffectMode = 'transactional' | 'own-transaction';

/**
 * The application table of the effect drains, in the system's schema (PostgreSQL) or database: one
 * row (seq) per run, no unique constraint, so a double write would show as a second row.
 */
export const EFFECT_TABLE = 'bench_effect';

/** What a consumer child is asked to do: run the system's executor with this concurrency. */
export interface ConsumerSpec {
  readonly system: SystemSpec;
  readonly concurrency: number;
  /** Record each execution's start time (latency runs), not only its sequence number. */
  readonly recordStarts: boolean;
}

/**
 * What a submitter child is asked to do: submit `count` commands (seq 1..count), each in its own
 * transaction — paced, one every `intervalMs` from one client, or as fast as `clients` concurrent
 * clients can.
 */
export type SubmitterSpec =
  | {
      readonly mode: 'paced';
      readonly system: SystemSpec;
      readonly count: number;
      readonly intervalMs: number;
      /**
       * The last submit starts this many ms after the one before it instead (wake-probe.ts: a
       * submitter that catches up just before it stops).
       */
      readonly lastGapMs?: number;
    }
  | {
      readonly mode: 'burst';
      readonly system: SystemSpec;
      readonly count: number;
      readonly clients: number;
      /** Submits made (and not timed) before reporting ready: JIT, plan caches, connections. */
      readonly warmup: number;
    };

/** The command type every system runs in the bench (and its raw-SQL baselines write). */
export const BENCH_TYPE = 'bench.noop';

/** The payload of every bench command: its sequence number, 1..count within a run. */
export interface BenchPayload {
  readonly seq: number;
  /** The soak: when its submit began (preciseNow), so the consumer measures submit → start itself. */
  readonly at?: number;
}

/** `window`: a soak consumer reports what ran since the last `window` (a `window` message back). */
export type ToChild = { readonly type: 'go' } | { readonly type: 'stop' } | { readonly type: 'window' };

export type FromChild =
  | { readonly type: 'ready' }
  /**
   * Commands run so far; consumers add when (epoch ms, preciseNow) and the CPU this process used
   * since go, µs.
   */
  | {
      readonly type: 'progress';
      readonly executed: number;
      readonly at?: number;
      readonly cpuMicros?: number;
    }
  /** Executions seen by a consumer: seqs[i] started at starts[i] (epoch ms, sub-ms precision). */
  | {
      readonly type: 'executions';
      readonly seqs: number[];
      readonly starts: number[];
      readonly diagnostics?: string;
      /** CPU (user + system) this process used from go to stop, µs. */
      readonly cpuMicros?: number;
      /** This process's peak resident set size, KiB. */
      readonly peakRssKb?: number;
    }
  /**
   * Commits made by a submitter: seqs[i] committed at commits[i] (epoch ms); where reported, its
   * transaction began at begins[i].
   */
  | {
      readonly type: 'commits';
      readonly seqs: number[];
      readonly commits: number[];
      readonly begins?: number[];
    }
  /** A burst of submits finished: `count` committed in `elapsedMs`. */
  | { readonly type: 'burst'; readonly count: number; readonly elapsedMs: number }
  /**
   * A soak child's window: its running total (run or submitted) and, from a consumer, the submit →
   * start latencies of the commands started since the previous window, as [bucket, count] pairs.
   */
  | {
      readonly type: 'window';
      readonly total: number;
      readonly latency: readonly (readonly [number, number])[];
    }
  | { readonly type: 'error'; readonly message: string };

/**
 * The one clock every process uses for latency: epoch milliseconds with sub-millisecond
 * precision. All processes run on the same machine, so their readings are comparable.
 */
export function preciseNow(): number {
  return performance.timeOrigin + performance.now();
}
