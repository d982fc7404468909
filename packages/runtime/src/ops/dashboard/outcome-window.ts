import type { CommandStore, OutcomeCount } from '@asynccmd/core';

/**
 * Throughput and submit-to-outcome latency of the last minutes, for the whole cluster: read from
 * the table (every instance's outcomes), not from this process's events. The window is cut into
 * buckets on the database clock; a bucket whose end lies `SETTLE_MS` in the past no longer changes
 * and is read once, so a refresh reads only the newest one or two buckets from the finished_at index.
 */

/** Latency bounds in ms (1-2-5 steps up to a day): p95 is estimated within one of these. */
export const LATENCY_BOUNDS_MS: readonly number[] = [
  5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 30_000, 60_000, 120_000, 300_000,
  600_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 86_400_000,
];

/**
 * After this, a bucket's rows are committed: an outcome's finished_at is the database clock of
 * its one-statement write, so it is visible within moments of that time.
 */
export const SETTLE_MS = 5_000;

export interface OutcomeBucket {
  /** Start of the bucket (database clock). */
  readonly start: string;
  readonly succeeded: number;
  readonly dead: number;
  /** Estimated 95th percentile of submit → outcome in ms; null when nothing finished. */
  readonly p95Ms: number | null;
}

/** How many outcomes took at most `upToMs` and more than the bound before it (null: beyond the last bound). */
export interface LatencyBar {
  readonly upToMs: number | null;
  readonly count: number;
}

export interface OutcomeTotal {
  readonly succeeded: number;
  readonly dead: number;
  /** Estimated percentiles of submit → outcome over the window, in ms; null when nothing finished. */
  readonly p50Ms: number | null;
  readonly p95Ms: number | null;
  readonly p99Ms: number | null;
  /**
   * The submit → outcome distribution over the window, one bar per latency bound from the first
   * bound any outcome fell in to the last (empty when nothing finished).
   */
  readonly distribution: readonly LatencyBar[];
}

export interface OutcomeSeries {
  readonly bucketMs: number;
  readonly windowMs: number;
  /** Oldest first; the last one is still filling. */
  readonly buckets: readonly OutcomeBucket[];
  readonly total: OutcomeTotal;
}

export interface OutcomeWindow {
  /** The series ending at `now` (database clock). */
  read(now: Date): Promise<OutcomeSeries>;
}

export function createOutcomeWindow(store: CommandStore, windowMs: number, bucketMs: number): OutcomeWindow {
  const size = Math.round(windowMs / bucketMs);
  const settled = new Map<number, readonly OutcomeCount[]>();
  return {
    async read(now) {
      const last = Math.floor(now.getTime() / bucketMs) * bucketMs;
      const first = last - (size - 1) * bucketMs;
      for (const start of settled.keys()) if (start < first) settled.delete(start);
      const buckets: { start: number; counts: readonly OutcomeCount[] }[] = [];
      for (let start = first; start <= last; start += bucketMs) {
        let counts = settled.get(start);
        if (counts === undefined) {
          counts = await store.outcomeCounts({
            from: new Date(start),
            to: new Date(start + bucketMs),
            latencyBoundsMs: LATENCY_BOUNDS_MS,
          });
          if (start + bucketMs + SETTLE_MS <= now.getTime()) settled.set(start, counts);
        }
        buckets.push({ start, counts });
      }
      const all = buckets.flatMap((b) => b.counts);
      return {
        bucketMs,
        windowMs: size * bucketMs,
        buckets: buckets.map((b) => ({ start: new Date(b.start).toISOString(), ...summarise(b.counts) })),
        total: totalOf(all),
      };
    },
  };
}

function tally(counts: readonly OutcomeCount[]): { succeeded: number; dead: number; histogram: number[] } {
  const histogram = new Array<number>(LATENCY_BOUNDS_MS.length + 1).fill(0);
  let succeeded = 0;
  let dead = 0;
  for (const c of counts) {
    if (c.status === 'SUCCESS') succeeded += c.count;
    else dead += c.count;
    histogram[c.latencyBucket] = (histogram[c.latencyBucket] ?? 0) + c.count;
  }
  return { succeeded, dead, histogram };
}

function summarise(counts: readonly OutcomeCount[]): Omit<OutcomeBucket, 'start'> {
  const { succeeded, dead, histogram } = tally(counts);
  return { succeeded, dead, p95Ms: estimateQuantile(histogram, LATENCY_BOUNDS_MS, 0.95) };
}

function totalOf(counts: readonly OutcomeCount[]): OutcomeTotal {
  const { succeeded, dead, histogram } = tally(counts);
  const used = histogram.flatMap((n, i) => (n > 0 ? [i] : []));
  const distribution =
    used.length === 0
      ? []
      : histogram
          .slice(used[0], used[used.length - 1]! + 1)
          .map((count, i) => ({ upToMs: LATENCY_BOUNDS_MS[used[0]! + i] ?? null, count }));
  const quantile = (q: number) => estimateQuantile(histogram, LATENCY_BOUNDS_MS, q);
  return {
    succeeded,
    dead,
    p50Ms: quantile(0.5),
    p95Ms: quantile(0.95),
    p99Ms: quantile(0.99),
    distribution,
  };
}

/**
 * The q-quantile of a histogram whose bucket i holds values in [bounds[i-1], bounds[i]) (bucket 0
 * from 0, the last one from the highest bound up), interpolated linearly within its bucket as
 * Prometheus's histogram_quantile does. In the open last bucket it answers that bucket's lower
 * bound: "at least". Null for an empty histogram.
 */
export function estimateQuantile(
  histogram: readonly number[],
  bounds: readonly number[],
  q: number,
): number | null {
  const total = histogram.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < histogram.length; i++) {
    const inBucket = histogram[i] ?? 0;
    if (inBucket > 0 && below + inBucket >= rank) {
      const lower = i === 0 ? 0 : (bounds[i - 1] ?? 0);
      const upper = bounds[i];
      if (upper === undefined) return lower;
      return Math.round(lower + ((upper - lower) * (rank - below)) / inBucket);
    }
    below += inBucket;
  }
  return bounds[bounds.length - 1] ?? 0;
}
