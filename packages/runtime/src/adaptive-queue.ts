import { adaptiveQueueSize, movingAverage } from '@asynccmd/core';
import { GROUP_MS } from './transaction-group.js';

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
  /** The most commands one slot ran one after another in its last job (attempts sharing a transaction). */
  #shared = 1;
  /** How long that job could take further commands: its transaction must fill within it to be fed. */
  #sharedWithinMs: number = GROUP_MS;

  constructor(readonly concurrency: number) {}

  /**
   * The queue's size now. While slots take queued attempts into their own transactions (up to
   * `shared` each) and those attempts are quick, enough wait for every slot's transaction to fill:
   * otherwise each slot would find one or two and commit for each of them.
   */
  get size(): number {
    if (this.#shared <= 1 || this.#executionMs === null) return this.#size;
    if (this.#executionMs * this.#shared > this.#sharedWithinMs) return this.#size;
    return Math.min(DEFAULT_ADAPTIVE_QUEUE_LIMIT, Math.max(this.#size, this.concurrency * this.#shared));
  }

  /**
   * A slot's job could take up to `most` commands one after another (1: only its own), for up to
   * `withinMs` after its start (default: the default transactionGroupMs).
   */
  sharedUpTo(most: number, withinMs: number = GROUP_MS): void {
    this.#shared = Math.max(1, Math.floor(most));
    this.#sharedWithinMs = withinMs;
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
