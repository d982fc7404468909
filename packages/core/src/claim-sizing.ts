/**
 * How many claimed-but-unstarted commands a pool keeps when its queue size adapts (no fixed
 * `queueSize`): enough to keep its slots busy while the next claim is on its way, no more.
 *
 * A pool of `concurrency` slots whose commands take `executionMs` each starts
 * `concurrency / executionMs` commands per millisecond. A claim takes `claimRoundTripMs`. The
 * scheduler refills once half the pool's places are free, so the half still queued at that moment
 * must cover one claim round trip: the queue is sized for two. Fast executors on a deep backlog
 * then get claims of hundreds of rows instead of a round trip per slot; slow executors get no
 * queue at all, so an instance never holds work that other instances could start now.
 */
export interface ClaimSizing {
  /** Slots of the pool. */
  readonly concurrency: number;
  /** Typical wall time of one execution in milliseconds; null before the first has finished. */
  readonly executionMs: number | null;
  /** Typical duration of one claim in milliseconds; null before the first claim. */
  readonly claimRoundTripMs: number | null;
  /** Largest queue allowed. */
  readonly limit: number;
}

/** Claim round trips' worth of work the queue holds (see ClaimSizing). */
export const CLAIM_ROUNDS_QUEUED = 2;

/** Below this an execution counts as this long: a no-op's measured 0 ms must not divide by zero. */
const SHORTEST_EXECUTION_MS = 0.001;

/** The queue size for `sizing`: an integer in [0, limit], 0 until both times are known. */
export function adaptiveQueueSize(sizing: ClaimSizing): number {
  const { concurrency, executionMs, claimRoundTripMs, limit } = sizing;
  const cap = Math.max(0, Math.floor(limit));
  if (executionMs === null || claimRoundTripMs === null) return 0;
  if (!(executionMs >= 0) || !(claimRoundTripMs >= 0) || !(concurrency > 0)) return 0;
  const startsPerMs = concurrency / Math.max(executionMs, SHORTEST_EXECUTION_MS);
  const size = Math.floor(startsPerMs * claimRoundTripMs * CLAIM_ROUNDS_QUEUED);
  return Math.min(cap, size);
}

/**
 * An exponentially weighted moving average step: `previous` moved `weight` (0..1] of the way to
 * `sample`; the first sample stands alone.
 */
export function movingAverage(previous: number | null, sample: number, weight: number): number {
  return previous === null ? sample : previous + weight * (sample - previous);
}
