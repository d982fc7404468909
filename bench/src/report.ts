import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { LatencySummary, Repeated, Target } from './stats.js';
import { meets, repeated } from './stats.js';

/** One system measured in one scenario, once per repeat. */
export interface Measurement {
  readonly section: string;
  readonly scenario: string;
  readonly system: string;
  readonly unit: 'jobs/s' | 'submits/s' | 'ms';
  /** Throughput per repeat; for latency rows, the p99 of each repeat. */
  readonly runs: number[];
  /** Latency rows: the summary over all repeats' samples pooled. */
  latency?: LatencySummary;
  /** What the database said after the run, e.g. "exactly once 20000/20000". */
  readonly checks: string[];
  readonly errors: string[];
  /** Per-run notes of the system under test (e.g. rows claimed per poll round); JSON only. */
  readonly diagnostics: string[];
  /** Per repeat: CPU of the consumer process(es) per command, µs (NaN where not measured). */
  readonly cpuUsPerCommand: number[];
  /** Per repeat: the largest peak RSS of a consumer process, MiB. */
  readonly peakRssMb: number[];
  /**
   * Per repeat: CPU of the database server per command, µs (NaN where not measured: SQLite runs
   * inside the consumer, or the server's processes are not visible in /proc).
   */
  readonly dbCpuUsPerCommand: number[];
  /** The settings the system ran with, printed under the section's table. */
  readonly settings: string;
}

/** A ratio between two measurements, computed per repeat (paired runs) and summarised. */
export interface Comparison {
  readonly section: string;
  readonly label: string;
  readonly ratio: Repeated;
  readonly target: Target;
  readonly met: boolean | null;
  /** '×' for ratios, ' ms' or ' MiB' for absolute bounds. */
  readonly unit: string;
}

export interface MachineInfo {
  readonly startedAt: string;
  readonly nproc: number;
  readonly loadAverage: number[];
  readonly node: string;
  readonly platform: string;
  readonly servers: Record<string, string>;
  readonly options: Record<string, unknown>;
  /** Per section: what did not run and why (e.g. a peer that does not install). */
  readonly notes?: Record<string, string[]>;
}

export function measurement(
  section: string,
  scenario: string,
  system: string,
  unit: Measurement['unit'],
  settings = '',
): Measurement {
  return {
    section,
    scenario,
    system,
    unit,
    settings,
    runs: [],
    checks: [],
    errors: [],
    diagnostics: [],
    cpuUsPerCommand: [],
    peakRssMb: [],
    dbCpuUsPerCommand: [],
  };
}

/**
 * Ratios of `value` over `baseline` per repeat: repeat i of both ran back to back, so their ratio
 * cancels most of the machine's drift between repeats.
 */
export function compare(
  section: string,
  label: string,
  value: Measurement,
  baseline: Measurement,
  target: Target,
  invert = false,
): Comparison {
  const n = Math.min(value.runs.length, baseline.runs.length);
  const ratios: number[] = [];
  for (let i = 0; i < n; i++) {
    const v = value.runs[i] as number;
    const b = baseline.runs[i] as number;
    ratios.push(invert ? b / v : v / b);
  }
  const summary = repeated(ratios.filter((r) => Number.isFinite(r) && r > 0));
  return { section, label, ratio: summary, target, met: meets(summary.median, target), unit: '×' };
}

/**
 * The database server's CPU per command of `value` over `baseline`'s, paired per repeat (lower is
 * better: ≤ 1 means the server spent no more on a command than on the baseline's).
 */
export function compareDbCpu(
  section: string,
  label: string,
  value: Measurement,
  baseline: Measurement,
  target: Target,
): Comparison {
  return compare(
    section,
    label,
    { ...value, runs: value.dbCpuUsPerCommand },
    { ...baseline, runs: baseline.dbCpuUsPerCommand },
    target,
  );
}

/** An absolute figure checked against a bound (e.g. IMMEDIATE p99 ≤ 2 ms), printed among the ratios. */
export function bound(section: string, label: string, value: Measurement, target: Target): Comparison {
  const summary = repeated(value.runs);
  return { section, label, ratio: summary, target, met: meets(summary.median, target), unit: ' ms' };
}

/** An absolute bound on the peak RSS of a measurement's consumer process, MiB. */
export function peakRssBound(section: string, label: string, value: Measurement, target: Target): Comparison {
  const summary = repeated(value.peakRssMb);
  return { section, label, ratio: summary, target, met: meets(summary.median, target), unit: ' MiB' };
}

const fmtNumber = (n: number, digits = 0): string =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '—';

const fmtMs = (n: number): string => (Number.isFinite(n) ? (n < 10 ? n.toFixed(2) : n.toFixed(1)) : '—');

function fmtValue(m: Measurement): string {
  if (m.unit === 'ms' && m.latency) {
    const l = m.latency;
    return `p50 ${fmtMs(l.p50)}  p95 ${fmtMs(l.p95)}  p99 ${fmtMs(l.p99)}  max ${fmtMs(l.max)} ms (n=${l.count})`;
  }
  return `${fmtNumber(repeated(m.runs).median)} ${m.unit}`;
}

function fmtRuns(m: Measurement): string {
  const digits = m.unit === 'ms' ? 2 : 0;
  const r = repeated(m.runs);
  const runs = m.runs.map((x) => fmtNumber(x, digits)).join(' / ');
  const spread =
    Number.isFinite(r.spread) && m.runs.length > 1 ? ` (±${Math.round((r.spread * 100) / 2)}%)` : '';
  return m.unit === 'ms' ? `p99 per run: ${runs}${spread}` : `${runs}${spread}`;
}

/** The median of a per-repeat cost figure; '—' where none was measured. */
function fmtCost(values: readonly number[], digits: number): string {
  const r = repeated(values);
  return Number.isFinite(r.median) ? fmtNumber(r.median, digits) : '—';
}

function fmtTarget(t: Target, unit: string): string {
  const parts: string[] = [];
  if (t.atLeast !== undefined) parts.push(`≥ ${t.atLeast}${unit}`);
  if (t.atMost !== undefined) parts.push(`≤ ${t.atMost}${unit}`);
  return parts.length > 0 ? `target ${parts.join(' ')}` : 'for information';
}

function pad(text: string, width: number): string {
  return text.length >= width ? text : text + ' '.repeat(width - text.length);
}

/** Rows as text, each column padded to its widest cell. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows
    .map((row) =>
      row
        .map((cell, i) => pad(cell, widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** The human-readable report: machine, then per section the measurements and the ratios. */
export function renderReport(
  info: MachineInfo,
  measurements: readonly Measurement[],
  comparisons: readonly Comparison[],
): string {
  const out: string[] = [];
  out.push(
    `asynccmd bench — ${info.startedAt} — nproc ${info.nproc}, load ${info.loadAverage.map((l) => l.toFixed(2)).join(' ')}, Node ${info.node}`,
  );
  for (const [name, version] of Object.entries(info.servers)) out.push(`  ${name}: ${version}`);
  const sections = [
    ...new Set([...measurements.map((m) => m.section), ...comparisons.map((c) => c.section)]),
  ];
  for (const section of sections) {
    out.push('', `== ${section} ==`);
    const inSection = measurements.filter((m) => m.section === section);
    const rows = inSection.map((m) => [
      m.scenario,
      m.system,
      fmtValue(m),
      fmtRuns(m),
      fmtCost(m.cpuUsPerCommand, 0),
      fmtCost(m.dbCpuUsPerCommand, 0),
      fmtCost(m.peakRssMb, 0),
      // The first line only: a stack trace stays in the JSON.
      [...m.checks, ...m.errors.map((e) => `ERROR: ${e.split('\n')[0] ?? e}`)].join('; '),
    ]);
    if (rows.length > 0)
      out.push(
        table([
          ['scenario', 'system', 'median', 'runs', 'CPU µs/cmd', 'DB CPU µs/cmd', 'peak RSS MiB', 'checks'],
          ...rows,
        ]),
      );
    const settings = new Map<string, string>();
    for (const m of inSection) if (m.settings !== '') settings.set(m.system, m.settings);
    if (settings.size > 0) {
      out.push('', 'settings:');
      for (const [system, text] of settings) out.push(`  ${system}: ${text}`);
    }
    const notes = info.notes?.[section] ?? [];
    for (const note of notes) out.push(`note: ${note}`);
    const ratios = comparisons
      .filter((c) => c.section === section)
      .map((c) => [
        c.label,
        Number.isFinite(c.ratio.median) ? `${c.ratio.median.toFixed(2)}${c.unit}` : '—',
        c.ratio.runs.length > 1 ? `runs ${c.ratio.runs.map((r) => r.toFixed(2)).join(' / ')}` : '',
        fmtTarget(c.target, c.unit),
        c.met === null ? '' : c.met ? 'met' : 'MISSED',
      ]);
    if (ratios.length > 0) out.push('', table([['ratio', 'median', 'per repeat', 'target', ''], ...ratios]));
  }
  return out.join('\n');
}

/** `extra`: further top-level entries (the soak's windows). */
export async function writeJson(
  path: string,
  info: MachineInfo,
  measurements: readonly Measurement[],
  comparisons: readonly Comparison[],
  extra: Record<string, unknown> = {},
): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const body = {
    machine: info,
    measurements: measurements.map((m) => ({
      ...m,
      median: repeated(m.runs).median,
      cpuUsPerCommandMedian: repeated(m.cpuUsPerCommand).median,
      dbCpuUsPerCommandMedian: repeated(m.dbCpuUsPerCommand).median,
      peakRssMbMedian: repeated(m.peakRssMb).median,
    })),
    comparisons,
    ...extra,
  };
  await writeFile(path, JSON.stringify(body, null, 2) + '\n');
}
