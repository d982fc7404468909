import {
  InvalidArgumentError,
  silentLogger,
  type CommandStore,
  type Logger,
  type PurgeParams,
} from '@asynccmd/core';

export interface PurgeOptions {
  /** Finished commands whose finishedAt is older than this (on the database clock) go. */
  readonly olderThanMs: number;
  /** Dead letters too. Default false: a dead letter is deleted only when someone asks for it. */
  readonly includeDead?: boolean;
  /** Rows per DELETE, so one purge never holds long locks or a huge transaction. Default 1000. */
  readonly batchSize?: number;
  /** Stops between batches when aborted (shutdown). */
  readonly signal?: AbortSignal;
}

export interface PurgeResult {
  readonly deleted: number;
  readonly batches: number;
  /** The finishedAt cutoff that was applied. */
  readonly olderThan: Date;
}

export const DEFAULT_PURGE_BATCH_SIZE = 1_000;

/** Deletes SUCCESS and CANCELLED (and, when asked, DEAD) commands in bounded batches until none is left. */
export async function purgeFinished(store: CommandStore, options: PurgeOptions): Promise<PurgeResult> {
  const batchSize = validatePurgeOptions(options);
  const olderThan = new Date((await store.now()).getTime() - options.olderThanMs);
  const statuses: PurgeParams['statuses'] = options.includeDead
    ? ['SUCCESS', 'CANCELLED', 'DEAD']
    : ['SUCCESS', 'CANCELLED'];
  let deleted = 0;
  let batches = 0;
  for (;;) {
    if (options.signal?.aborted) break;
    const n = await store.purge({ olderThan, statuses, limit: batchSize });
    deleted += n;
    batches += 1;
    if (n < batchSize) break;
  }
  return { deleted, batches, olderThan };
}

/** Returns the batch size to use; throws INVALID_ARGUMENT for nonsense. */
function validatePurgeOptions(options: PurgeOptions): number {
  const batchSize = options.batchSize ?? DEFAULT_PURGE_BATCH_SIZE;
  if (!Number.isSafeInteger(options.olderThanMs) || options.olderThanMs < 0) {
    throw new InvalidArgumentError(
      `olderThanMs must be a non-negative whole number, not ${options.olderThanMs}`,
    );
  }
  if (!Number.isSafeInteger(batchSize) || batchSize < 1 || batchSize > 100_000) {
    throw new InvalidArgumentError(`batchSize must be between 1 and 100000, not ${batchSize}`);
  }
  return batchSize;
}

/** setTimeout/clearTimeout, injectable so tests drive the job without waiting. */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const nodeTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface RetentionJobOptions extends PurgeOptions {
  readonly store: CommandStore;
  /** Time between the end of one purge and the start of the next. Default 1 h. */
  readonly intervalMs?: number;
  /** Run once right away on start(). Default true. */
  readonly runOnStart?: boolean;
  readonly timers?: Timers;
  readonly logger?: Logger;
  /** Called after each run (for metrics or tests). */
  readonly onRun?: (outcome: { result?: PurgeResult; error?: unknown }) => void;
}

/**
 * Runs purgeFinished periodically. Runs never overlap: the next one is scheduled when the previous
 * one ends. A failed run is logged and retried at the next interval.
 */
export class RetentionJob {
  private readonly timers: Timers;
  private readonly intervalMs: number;
  private readonly logger: Logger;
  private handle: unknown = null;
  private running: Promise<void> | null = null;
  private started = false;
  private abort = new AbortController();

  constructor(private readonly options: RetentionJobOptions) {
    this.timers = options.timers ?? nodeTimers;
    this.intervalMs = options.intervalMs ?? 3_600_000;
    this.logger = options.logger ?? silentLogger;
    validatePurgeOptions(options);
    if (!Number.isSafeInteger(this.intervalMs) || this.intervalMs < 1) {
      throw new InvalidArgumentError(`intervalMs must be a positive whole number, not ${this.intervalMs}`);
    }
  }

  get isRunning(): boolean {
    return this.started;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.abort = new AbortController();
    if (this.options.runOnStart ?? true) this.tick();
    else this.schedule();
  }

  /** Stops scheduling, interrupts a purge between batches, and waits for it. */
  async stop(): Promise<void> {
    this.started = false;
    this.abort.abort();
    if (this.handle !== null) {
      this.timers.clearTimeout(this.handle);
      this.handle = null;
    }
    await this.running;
  }

  /** One purge now (also what each tick does). Never throws: failures are logged and reported to onRun. */
  async runOnce(): Promise<void> {
    const { store, olderThanMs, includeDead, batchSize } = this.options;
    try {
      const result = await purgeFinished(store, {
        olderThanMs,
        includeDead,
        batchSize,
        signal: this.abort.signal,
      });
      if (result.deleted > 0) this.logger.info({ ...result }, 'asynccmd retention purged finished commands');
      this.options.onRun?.({ result });
    } catch (error) {
      this.logger.error({ err: error }, 'asynccmd retention purge failed');
      this.options.onRun?.({ error });
    }
  }

  private tick(): void {
    this.handle = null;
    this.running = this.runOnce().finally(() => {
      this.running = null;
      if (this.started) this.schedule();
    });
  }

  private schedule(): void {
    this.handle = this.timers.setTimeout(() => this.tick(), this.intervalMs);
  }
}
