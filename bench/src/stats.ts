/** Pure helpers for the figures the bench prints: percentiles, rates, ratios and run-to-run spread. */

/** Nearest-rank percentile (p in 0..100) of an unsorted sample; NaN for an empty sample. */
export function percentile(sample: readonly number[], p: number): number {
  if (sample.length === 0) return Number.NaN;
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be within 0..100, got ${p}`);
  const sorted = [...sample].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1] as number;
}

export interface LatencySummary {
  readonly count: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly max: number;
}

export function summariseLatency(sample: readonly number[]): LatencySummary {
  return {
    count: sample.length,
    p50: percentile(sample, 50),
    p95: percentile(sample, 95),
    p99: percentile(sample, 99),
    max: percentile(sample, 100),
  };
}

/** Items per second; NaN when no time elapsed. */
export function rate(items: number, elapsedMs: number): number {
  return elapsedMs > 0 ? (items * 1000) / elapsedMs : Number.NaN;
}

/** value / baseline, NaN when either is missing or the baseline is not positive. */
export function ratio(value: number, baseline: number): number {
  if (!Number.isFinite(value) || !Number.isFinite(baseline) || baseline <= 0) return Number.NaN;
  return value / baseline;
}

/** The median of repeated measurements, with their spread, so noise is printed beside the figure. */
export interface Repeated {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** (max − min) / median: 0.1 means the runs differed by 10 % of the figure. */
  readonly spread: number;
  readonly runs: readonly number[];
}

export function repeated(runs: readonly number[]): Repeated {
  const finite = runs.filter((r) => Number.isFinite(r));
  if (finite.length === 0)
    return { median: Number.NaN, min: Number.NaN, max: Number.NaN, spread: Number.NaN, runs };
  const sorted = [...finite].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median =
    sorted.length % 2 === 1
      ? (sorted[mid] as number)
      : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  const min = sorted[0] as number;
  const max = sorted[sorted.length - 1] as number;
  return { median, min, max, spread: median > 0 ? (max - min) / median : Number.NaN, runs };
}

/**
 * A target is met when the measured ratio reaches at least `atLeast` (or stays at most `atMost`);
 * `{}` marks a figure shown for information.
 */
export interface Target {
  readonly atLeast?: number;
  readonly atMost?: number;
}

export function meets(value: number, target: Target): boolean | null {
  // No bound: the figure is printed for information only.
  if (!Number.isFinite(value) || (target.atLeast === undefined && target.atMost === undefined)) return null;
  if (target.atLeast !== undefined && value < target.atLeast) return false;
  if (target.atMost !== undefined && value > target.atMost) return false;
  return true;
}
