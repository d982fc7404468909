import type { Target } from '../stats.js';

/**
 * The soak scenario's arithmetic, free of I/O: its timing (scaled down by --quick), the latency
 * histograms the consumer reports per window, the windows' table and the targets' verdicts.
 */

/** Soak variants: autovacuum at its defaults, autovacuum off, and the held snapshot (autovacuum on). */
export const SOAK_VARIANTS = ['autovacuum', 'no-autovacuum', 'held'] as const;
export type SoakVariant = (typeof SOAK_VARIANTS)[number];

export const SOAK_SYSTEMS = ['asynccmd', 'graphile', 'pg-boss'] as const;
export type SoakSystem = (typeof SOAK_SYSTEMS)[number];

/** Every length of a soak run, seconds (the window and hold ones scaled with the run under --quick). */
export interface SoakTiming {
  readonly durationS: number;
  /** Rows of the table: a minute, or 30 s in the held variant. */
  readonly windowS: number;
  /** The span the first-vs-last comparisons take (5 minutes of a full run). */
  readonly spanS: number;
  /** Finished work older than this is deleted (10 minutes of a full run). */
  readonly retentionS: number;
  /** How often asynccmd's retention runs (a minute of a full run). */
  readonly purgeIntervalS: number;
  /** The held snapshot: from holdStartS for holdS seconds (the middle of the run); 0 when not held. */
  readonly holdStartS: number;
  readonly holdS: number;
}

const FULL_MINUTES = 30;

/**
 * The timing of a variant `minutes` long. A full run keeps the lengths (1-minute rows, 30 s
 * in the held variant, 5-minute spans, 10-minute retention, a 120 s hold); `quick` scales all of them
 * by minutes / 30, so a 2-minute smoke run has the same shape in small.
 */
export function soakTiming(minutes: number, variant: SoakVariant, quick: boolean): SoakTiming {
  const durationS = Math.round(minutes * 60);
  const scale = quick ? minutes / FULL_MINUTES : 1;
  const s = (seconds: number, least: number): number => Math.max(least, Math.round(seconds * scale));
  const held = variant === 'held';
  const holdS = held ? s(120, 4) : 0;
  return {
    durationS,
    windowS: s(held ? 30 : 60, 2),
    spanS: s(300, 4),
    retentionS: s(600, 5),
    purgeIntervalS: s(60, 2),
    holdStartS: held ? Math.max(0, Math.round((durationS - holdS) / 2)) : 0,
    holdS,
  };
}

/** Latency histogram: bucket k holds samples up to BASE_MS × GROWTH^k (2 % wide). */
const BASE_MS = 0.01;
const GROWTH = 1.02;

export type Histogram = Map<number, number>;

export function bucketOf(ms: number): number {
  return ms <= BASE_MS ? 0 : Math.ceil(Math.log(ms / BASE_MS) / Math.log(GROWTH));
}

export function bucketUpperMs(bucket: number): number {
  return BASE_MS * GROWTH ** bucket;
}

export function record(histogram: Histogram, ms: number): void {
  const b = bucketOf(ms);
  histogram.set(b, (histogram.get(b) ?? 0) + 1);
}

/** Histograms pooled (as their [bucket, count] pairs, the form they travel in between processes). */
export function merge(parts: readonly (readonly (readonly [number, number])[])[]): Histogram {
  const out: Histogram = new Map();
  for (const part of parts) for (const [b, n] of part) out.set(b, (out.get(b) ?? 0) + n);
  return out;
}

/** The p-th percentile (upper bound of its bucket), NaN when empty. */
export function histogramPercentile(histogram: Histogram, p: number): number {
  let total = 0;
  for (const n of histogram.values()) total += n;
  if (total === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * total);
  let seen = 0;
  for (const b of [...histogram.keys()].sort((x, y) => x - y)) {
    seen += histogram.get(b) ?? 0;
    if (seen >= rank) return bucketUpperMs(b);
  }
  return Number.NaN;
}

/** One row of a soak run: what happened in the window ending `endS` seconds into the run. */
export interface SoakWindow {
  readonly endS: number;
  readonly seconds: number;
  readonly submitted: number;
  readonly drained: number;
  /** Submitted but not yet run, at the window's end. */
  readonly backlog: number;
  /** Submit → start latencies of the commands started in the window, as [bucket, count] pairs. */
  readonly latency: readonly (readonly [number, number])[];
  /** Tables, indexes and TOAST of the system's schema, bytes, at the window's end. */
  readonly totalBytes: number;
  /** n_dead_tup summed over the schema's tables (pg_stat_user_tables), at the window's end. */
  readonly deadTuples: number;
  /** Autovacuum runs on the schema's tables so far (autovacuum_count; NaN where not counted). */
  readonly autovacuums: number;
  /** Whether the window lies (partly) inside the held snapshot. */
  readonly held: boolean;
}

export const windowP99 = (w: SoakWindow): number => histogramPercentile(merge([w.latency]), 99);

/** A verdict of one target: its value against the bound. */
export interface SoakVerdict {
  readonly label: string;
  readonly value: number;
  readonly target: Target;
  readonly unit: string;
}

const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);

function drainRate(windows: readonly SoakWindow[]): number {
  const seconds = sum(windows.map((w) => w.seconds));
  return seconds > 0 ? sum(windows.map((w) => w.drained)) / seconds : Number.NaN;
}

function pooledP99(windows: readonly SoakWindow[]): number {
  return histogramPercentile(merge(windows.map((w) => w.latency)), 99);
}

/** The window whose end lies nearest `atS`. */
function nearest(windows: readonly SoakWindow[], atS: number): SoakWindow | undefined {
  let best: SoakWindow | undefined;
  for (const w of windows) if (!best || Math.abs(w.endS - atS) < Math.abs(best.endS - atS)) best = w;
  return best;
}

/**
 * The soak targets: throughput of the last span ≥ 0.95× the first, total size from the middle to
 * the end grows ≤ 20 %, p99 of the last span ≤ 1.5× the first (span: 5 minutes of a full run).
 */
export function soakVerdicts(windows: readonly SoakWindow[], timing: SoakTiming): SoakVerdict[] {
  const first = windows.filter((w) => w.endS - w.seconds < timing.spanS);
  const last = windows.filter((w) => w.endS > timing.durationS - timing.spanS);
  const mid = nearest(windows, timing.durationS / 2);
  const end = windows[windows.length - 1];
  const minute = (s: number): string => (s % 60 === 0 ? `${s / 60} min` : `${s} s`);
  const span = minute(timing.spanS);
  return [
    {
      label: `drained/s, last ${span} / first ${span}`,
      value: drainRate(last) / drainRate(first),
      target: { atLeast: 0.95 },
      unit: '×',
    },
    {
      label: `total size, ${minute(end?.endS ?? 0)} / ${minute(mid?.endS ?? 0)}`,
      value: mid && end ? end.totalBytes / mid.totalBytes : Number.NaN,
      target: { atMost: 1.2 },
      unit: '×',
    },
    {
      label: `submit → start p99, last ${span} / first ${span}`,
      value: pooledP99(last) / pooledP99(first),
      target: { atMost: 1.5 },
      unit: '×',
    },
  ];
}

/** Commands/s the submitter reached over the windows (below the asked rate when it fell behind). */
export function submittedRate(windows: readonly SoakWindow[]): number {
  const seconds = sum(windows.map((w) => w.seconds));
  return seconds > 0 ? sum(windows.map((w) => w.submitted)) / seconds : Number.NaN;
}

/**
 * The held-snapshot targets over the windows inside the hold: in none of them drained/s below 0.9×
 * what was submitted in it, the backlog never above 10 s of submits (at the rate reached over the
 * run), submit → start p99 over the hold ≤ 1 s.
 */
export function heldVerdicts(windows: readonly SoakWindow[]): SoakVerdict[] {
  const held = windows.filter((w) => w.held);
  const least = Math.min(...held.map((w) => w.drained / Math.max(1, w.submitted)));
  const most = Math.max(...held.map((w) => w.backlog));
  return [
    {
      label: 'during the hold: least drained / submitted of a window',
      value: held.length > 0 ? least : Number.NaN,
      target: { atLeast: 0.9 },
      unit: '×',
    },
    {
      label: 'during the hold: largest backlog / 10 s of submits',
      value: held.length > 0 ? most / (10 * submittedRate(windows)) : Number.NaN,
      target: { atMost: 1 },
      unit: '×',
    },
    {
      label: 'during the hold: submit → start p99',
      value: pooledP99(held),
      target: { atMost: 1000 },
      unit: ' ms',
    },
  ];
}

const MB = 1024 * 1024;

const fmt = (n: number, digits = 0): string =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '—';

/** The windows as table rows (header first), for the report. */
export function windowRows(windows: readonly SoakWindow[]): string[][] {
  return [
    ['until s', 'submitted/s', 'drained/s', 'backlog', 'p99 ms', 'size MB', 'dead tuples', 'autovacuums', ''],
    ...windows.map((w) => [
      fmt(w.endS),
      fmt(w.submitted / w.seconds),
      fmt(w.drained / w.seconds),
      fmt(w.backlog),
      fmt(windowP99(w), 1),
      fmt(w.totalBytes / MB, 1),
      fmt(w.deadTuples),
      fmt(w.autovacuums),
      w.held ? 'held' : '',
    ]),
  ];
}
