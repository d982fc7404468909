/**
 * The scenario groups (`--scenarios`); `submits` and `memory` run on PostgreSQL only. `memory` (one
 * consumer draining a million commands, for its peak RSS) takes minutes: it runs only when named.
 * `effects`: drains whose executor inserts one row per command into an application table, on all
 * three databases. `soak` (soak/run.ts): half an hour per system and variant, on PostgreSQL servers
 * the bench starts itself; only when named.
 */
export const SCENARIOS = ['drain', 'latency', 'submits', 'memory', 'effects', 'soak'] as const;
export type Scenario = (typeof SCENARIOS)[number];
export const DEFAULT_SCENARIOS: readonly Scenario[] = ['drain', 'latency', 'submits'];

/** One drain configuration: consumer processes, each with this concurrency. */
export interface DrainShape {
  readonly processes: number;
  readonly concurrency: number;
}

/** How big each scenario is: the full run (`npm run bench`) and a quick one for development. */
export interface Sizes {
  /** Commands per drain run (timed). */
  readonly drainTotal: number;
  /** The drain rows to run, by system key (`--rows`); undefined: every row. */
  readonly rows?: readonly string[];
  /** Members of the batch drain's batch (and its callback, timed instead of drainTotal). */
  readonly batchMembers: number;
  /**
   * Commands each consumer process runs first, untimed, before a drain's window opens (JIT, plan
   * caches, a peer's start-up): a drain measures a worker that has been running, as the latency
   * and submit runs drop their leading samples.
   */
  readonly drainWarmupPerProcess: number;
  /** SUCCESS rows already in the table for the "history" drain. */
  readonly finishedRows: number;
  /** Concurrency of the history drains and of the latency consumers. */
  readonly concurrency: number;
  /** Processes of the multi-process history drain. */
  readonly processes: number;
  /** The PostgreSQL drains, every system in each shape. */
  readonly pgShapes: readonly DrainShape[];
  /** The MySQL/MariaDB drains. */
  readonly mysqlShapes: readonly DrainShape[];
  /** The SQLite drains (one file, so one process). */
  readonly sqliteShapes: readonly DrainShape[];
  /** The effect drains (`effects`), on every database. */
  readonly effectShapes: readonly DrainShape[];
  /** Rows per claim of the raw-SQL reference loops. */
  readonly rawBatch: number;
  /** Sidequest's dispatcher polling interval, ms. */
  readonly sidequestPollMs: number;
  /** Commit → start samples per system and repeat, over all its rounds. */
  readonly latencySamples: number;
  /**
   * Each repeat's latency runs are split into this many rounds, the systems taking turns (each
   * round a fresh consumer and submitter), so that machine load falls on all systems alike; the
   * percentiles are taken over the rounds' samples pooled.
   */
  readonly latencyRounds: number;
  /** Leading samples of each round dropped (connections, JIT, plan caches warming up). */
  readonly latencyWarmup: number;
  readonly latencyIntervalMs: number;
  readonly submits: number;
  /** Untimed submits each submitter makes first (JIT, plan caches), as for latency. */
  readonly submitWarmup: number;
  readonly submitClients: number;
  /** Rounds of all submit systems per repeat: each run is short, so one repeat pairs several. */
  readonly submitRounds: number;
  /** Each scenario runs this many times, systems interleaved, so the spread shows the noise. */
  readonly repeats: number;
  /**
   * A drain still running after this long is stopped there and reported as the rate until then
   * (what ran is still checked exactly-once): a slow system cannot blow the time budget.
   */
  readonly drainCapMs: number;
  /** A latency or submit run that takes longer than this is abandoned and reported as an error. */
  readonly runTimeoutMs: number;
  /** Commands of the `memory` drain (one PostgreSQL consumer, its peak RSS), and its time cap. */
  readonly memoryTotal: number;
  readonly memoryCapMs: number;
}

export const FULL: Sizes = {
  drainTotal: 20_000,
  batchMembers: 10_000,
  drainWarmupPerProcess: 2_500,
  finishedRows: 200_000,
  concurrency: 10,
  processes: 4,
  pgShapes: [
    { processes: 1, concurrency: 1 },
    { processes: 1, concurrency: 10 },
    { processes: 1, concurrency: 50 },
    { processes: 4, concurrency: 10 },
  ],
  mysqlShapes: [
    { processes: 1, concurrency: 10 },
    { processes: 4, concurrency: 10 },
  ],
  sqliteShapes: [{ processes: 1, concurrency: 10 }],
  effectShapes: [{ processes: 1, concurrency: 10 }],
  rawBatch: 500,
  sidequestPollMs: 50,
  latencySamples: 1_600,
  latencyRounds: 4,
  latencyWarmup: 200,
  latencyIntervalMs: 10,
  submits: 4_000,
  submitWarmup: 2_000,
  submitClients: 8,
  submitRounds: 3,
  repeats: 2,
  drainCapMs: 30_000,
  runTimeoutMs: 120_000,
  memoryTotal: 1_000_000,
  memoryCapMs: 600_000,
};

export const QUICK: Sizes = {
  ...FULL,
  drainTotal: 2_000,
  batchMembers: 1_000,
  drainWarmupPerProcess: 500,
  finishedRows: 20_000,
  pgShapes: [
    { processes: 1, concurrency: 10 },
    { processes: 4, concurrency: 10 },
  ],
  mysqlShapes: [{ processes: 1, concurrency: 10 }],
  latencySamples: 200,
  latencyRounds: 2,
  latencyWarmup: 50,
  submits: 800,
  submitWarmup: 200,
  submitRounds: 1,
  repeats: 1,
  drainCapMs: 15_000,
  runTimeoutMs: 60_000,
  memoryTotal: 100_000,
  memoryCapMs: 120_000,
};
