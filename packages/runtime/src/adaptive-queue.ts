import { adaptiveQueueSize, movingAverage } from '@asynccmd/core';

/** Largest adaptive queue of one pool: claimed rows held in memory stay bounded. */
export const DEFAULT_ADAPTIVE_QUEUE_LIMIT = 500;

/**
 * Weights of the newest sample in the moving averages: an execution time follows the last few
 * dozen commands, a claim time the last few claims.
 */
const EXECUTION_WEIGHT = 0.05;
const CLAIM_WEIGHT = 0.2;

/**
 * How many claimed commands may wait for `concurrency` runners, from the measured execution and
 * claim times (core adaptiveQueueSize, at most DEFAULT_ADAPTIVE_QUEUE_LIMIT): 0 until both are known.
 * A pool's adaptive queue, and the SCHEDULED claim of the poll loop (one runner: the loop itself).
 */
export class AdaptiveQueue {
  #executionMs: number | null = null;
  #claimMs: number | null = null;
  #size = 0;

  constructor(readonly concurrency: number) {}

  get size(): number {
    return this.#size;
  }

  /** One command ran for `ms` (wall time). */
  executionTook(ms: number): void {
    this.#executionMs = movingAverage(this.#executionMs, ms, EXECUTION_WEIGHT);
    this.#resize();
  }

  /** One claim took `ms`. */
  claimTook(ms: number): void {
    this.#claimMs = movingAverage(this.#claimMs, ms, CLAIM_WEIGHT);
    this.#resize();
  }

  #resize(): void {
    this.#size = adaptiveQueueSize({
      concurrency: this.concurrency,
      executionMs: this.#executionMs,
      claimRoundTripMs: this.#claimMs,
      limit: DEFAULT_ADAPTIVE_QUEUE_LIMIT,
    });
  }
}
