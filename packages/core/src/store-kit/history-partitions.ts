/*
 * Time partitions of a history table, planned the same way on every database that has them
 * (PostgreSQL declarative partitions, MySQL/MariaDB RANGE partitions): pure, from what the adapter
 * read from its catalog and clock. A partition holds the commands finished in [lower, upper);
 * retention drops a partition whose upper bound is past its cutoff instead of deleting its rows.
 */

/** Partitions made ahead of the clock at most (a narrow width with a rare purge is capped here). */
export const MAX_PARTITIONS_AHEAD = 24;

/** How far ahead of the clock the partitions reach at least: beyond the next purge of the default hourly interval. */
export const PARTITIONS_AHEAD_MS = 2 * 3_600_000;

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** The widths a partition may have: each divides a day, so boundaries fall on round UTC times. */
export const PARTITION_WIDTHS_MS = [
  MINUTE,
  2 * MINUTE,
  5 * MINUTE,
  10 * MINUTE,
  15 * MINUTE,
  30 * MINUTE,
  HOUR,
  2 * HOUR,
  3 * HOUR,
  6 * HOUR,
  12 * HOUR,
  24 * HOUR,
] as const;

/**
 * The width of new partitions for a retention of `retentionMs`: the widest of PARTITION_WIDTHS_MS
 * at most a quarter of it, so a partition is dropped at most a quarter of the retention after its
 * last row came due (a minute at least, a day at most).
 */
export function partitionWidthMs(retentionMs: number): number {
  const quarter = retentionMs / 4;
  let width: number = PARTITION_WIDTHS_MS[0];
  for (const w of PARTITION_WIDTHS_MS) if (w <= quarter) width = w;
  return width;
}

/** A range partition of the history: rows finished in [lowerMs, upperMs). */
export interface HistoryPartition {
  readonly name: string;
  readonly lowerMs: number;
  readonly upperMs: number;
}

/** What maintenance does: partitions to drop, ranges to make. Pure, from what it read. */
export interface PartitionPlan {
  readonly drop: readonly HistoryPartition[];
  readonly make: readonly { readonly lowerMs: number; readonly upperMs: number }[];
}

/**
 * Drops every partition wholly before `olderThanMs`; makes partitions of `widthMs` (boundaries on
 * multiples of it) from the end of the last one, or the start of the clock's (whichever is later),
 * past the newest row the catch-all partition holds (a partition may not take rows it holds),
 * until they reach PARTITIONS_AHEAD_MS (at least two widths, at most MAX_PARTITIONS_AHEAD widths)
 * past `nowMs`.
 */
export function partitionPlan(
  partitions: readonly HistoryPartition[],
  /**
   * The newest finish time the catch-all partition holds (PostgreSQL's DEFAULT partition may not
   * hold a row of a partition attached later); null when none, or when the database moves such
   * rows into the new partitions itself (MySQL's REORGANIZE PARTITION of the MAXVALUE partition).
   */
  newestInDefaultMs: number | null,
  nowMs: number,
  olderThanMs: number,
  widthMs: number,
): PartitionPlan {
  const drop = partitions.filter((p) => p.upperMs <= olderThanMs);
  const ceil = (ms: number): number => Math.ceil(ms / widthMs) * widthMs;
  const floor = (ms: number): number => Math.floor(ms / widthMs) * widthMs;
  const lastUpper = partitions.reduce<number | null>(
    (m, p) => (m === null ? p.upperMs : Math.max(m, p.upperMs)),
    null,
  );
  // Never behind the clock's own partition: what finished since the last one is in the catch-all.
  let lower = lastUpper === null ? floor(nowMs) : Math.max(lastUpper, floor(nowMs));
  // A row of the catch-all partition at or past `lower` must stay out of every new partition's range.
  if (newestInDefaultMs !== null && newestInDefaultMs >= lower) lower = ceil(newestInDefaultMs + 1);
  const reach = nowMs + Math.min(Math.max(PARTITIONS_AHEAD_MS, 2 * widthMs), MAX_PARTITIONS_AHEAD * widthMs);
  const make: { lowerMs: number; upperMs: number }[] = [];
  while (lower < reach) {
    const upper = ceil(lower + 1);
    make.push({ lowerMs: lower, upperMs: upper });
    lower = upper;
  }
  return { drop, make };
}
