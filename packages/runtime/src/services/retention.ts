import { InvalidArgumentError, type CommandStore, type Logger, type PurgeParams } from '@asynccmd/core';
import { MAX_PURGE_BATCH_SIZE } from '../options-validation.js';
import type { StoreOutage } from '../store-outage.js';
import { PeriodicService, type RunOutcome } from './periodic-service.js';

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
  // The windows of leading-edge throttles ended before the cutoff (windows are never longer than
  // the retention): a key without a row has none.
  for (;;) {
    if (options.signal?.aborted) break;
    if ((await store.submitWindows.prune(olderThan, batchSize)) < batchSize) break;
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
  if (!Number.isSafeInteger(batchSize) || batchSize < 1 || batchSize > MAX_PURGE_BATCH_SIZE) {
    throw new InvalidArgumentError(
      `batchSize must be between 1 and ${MAX_PURGE_BATCH_SIZE}, not ${batchSize}`,
    );
  }
  return batchSize;
}

/** The runtime's `retention` option: what purgeFinished is given, and how often. */
export interface RetentionOptions extends Omit<PurgeOptions, 'signal'> {
  /** From the start of one purge to the start of the next; the first comes at start. Default 1 h. */
  readonly intervalMs?: number;
}

export const DEFAULT_RETENTION_INTERVAL_MS = 3_600_000;

/**
 * Runs purgeFinished at start and then periodically. Purges never overlap; stop() interrupts one
 * between batches. A failed purge is reported as a store outage of `purge` and tried again after
 * the interval.
 */
export class Retention extends PeriodicService {
  constructor(
    private readonly store: CommandStore,
    outage: StoreOutage,
    private readonly logger: Logger,
    readonly options: RetentionOptions,
  ) {
    const intervalMs = options.intervalMs ?? DEFAULT_RETENTION_INTERVAL_MS;
    super(
      { operation: 'purge', intervalMs, runOnStart: true, maxOutageDelayMs: Math.max(intervalMs, 5_000) },
      outage,
    );
  }

  protected async work(signal: AbortSignal): Promise<RunOutcome> {
    const { olderThanMs, includeDead, batchSize } = this.options;
    const result = await purgeFinished(this.store, { olderThanMs, includeDead, batchSize, signal });
    if (result.deleted > 0) this.logger.info({ ...result }, 'asynccmd retention purged finished commands');
    return 'done';
  }
}
