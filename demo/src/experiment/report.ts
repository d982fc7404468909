import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DownstreamProfiles } from '../downstream.js';
import { formatMs, type Percentiles } from '../stats.js';
import type { CheckResult } from './checks.js';
import type { VariantResult } from './variant.js';

export interface ExperimentReport {
  readonly experimentId: string;
  readonly startedAt: string;
  readonly fixedConditions: {
    readonly orders: number;
    readonly concurrency: number;
    readonly seed: number;
    readonly requestMix: string;
    readonly downstreamBehavior: DownstreamProfiles;
    readonly retries: string;
    readonly database: string;
    readonly pools: string;
    readonly node: string;
    readonly machine: { readonly cpus: number; readonly loadAverage1m: number };
  };
  readonly variants: readonly VariantResult[];
  readonly failureChecks: readonly CheckResult[];
  /** The load sweep (--sweep): both variants at each request rate, open loop. */
  readonly sweep: { readonly secondsPerRate: number; readonly points: readonly SweepPoint[] } | null;
  readonly decision: {
    readonly removableCriticalPathTime: string;
    readonly newConsistencyWindow: string;
    readonly acceptedOperationalCost: string;
  };
}

/** One variant at one request rate of the sweep. */
export interface SweepPoint {
  readonly ratePerSec: number;
  readonly boundary: VariantResult['boundary'];
  readonly requests: number;
  /** Answers per second while sending: below the rate asked for once the service falls behind. */
  readonly answeredRatePerSec: number;
  readonly responseMs: Percentiles;
  /** The consistency window: accept → terminal (0 for the synchronous variant, done at its response). */
  readonly acceptToTerminalMs: Percentiles;
  readonly completedThroughputPerSec: number;
  readonly stillPending: number;
  readonly incorrectOrInvisible: number;
}

/** The sweep as a table: one row per rate, the two variants side by side. */
export function formatSweep(points: readonly SweepPoint[]): string {
  const rates = [...new Set(points.map((p) => p.ratePerSec))];
  const at = (rate: number, b: SweepPoint['boundary']) =>
    points.find((p) => p.ratePerSec === rate && p.boundary === b);
  const cell = (p: SweepPoint | undefined, f: (p: SweepPoint) => string) => (p ? f(p) : '—');
  const rows = [
    [
      'orders/s',
      'sync response p95',
      'split response p95',
      'split accept→terminal p95',
      'answered/s sync · split',
      'completed/s sync · split',
      'invisible sync · pending split',
    ],
    ...rates.map((r) => {
      const sync = at(r, 'synchronous');
      const split = at(r, 'split');
      return [
        String(r),
        cell(sync, (p) => formatMs(p.responseMs.p95)),
        cell(split, (p) => formatMs(p.responseMs.p95)),
        cell(split, (p) => formatMs(p.acceptToTerminalMs.p95)),
        `${cell(sync, (p) => p.answeredRatePerSec.toFixed(0))} · ${cell(split, (p) => p.answeredRatePerSec.toFixed(0))}`,
        `${cell(sync, (p) => p.completedThroughputPerSec.toFixed(0))} · ${cell(split, (p) => p.completedThroughputPerSec.toFixed(0))}`,
        `${cell(sync, (p) => String(p.incorrectOrInvisible))} · ${cell(split, (p) => String(p.stillPending))}`,
      ];
    }),
  ];
  return renderTable(rows).join('\n');
}

const three = (p: Percentiles) => `${formatMs(p.p50)} / ${formatMs(p.p95)} / ${formatMs(p.p99)}`;
const two = (p: Percentiles, none: string) =>
  p.count === 0 ? none : `${formatMs(p.p95)} / ${formatMs(p.p99)}`;
const counts = (c: Readonly<Record<string, number>>) =>
  Object.entries(c)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ') || '—';

/** The side-by-side table of seed 2 §5, one row per measurement. */
export function formatVariants(variants: readonly VariantResult[]): string {
  const rows: [string, (v: VariantResult) => string][] = [
    ['response p50 / p95 / p99', (v) => three(v.responseMs)],
    ['responses (HTTP status)', (v) => counts(v.responses)],
    ['accepted operations', (v) => String(v.acceptedOperations)],
    [
      'terminal, by state',
      (v) => counts(v.terminalByState) + (v.stillPending ? `, still pending ${v.stillPending}` : ''),
    ],
    ['completed throughput', (v) => `${v.completedThroughputPerSec.toFixed(1)} orders/s`],
    [
      'accept→terminal p95 / p99',
      (v) => (v.boundary === 'synchronous' ? 'at the response (0)' : two(v.acceptToTerminalMs, '—')),
    ],
    ['pending age p95 / p99', (v) => two(v.pendingAgeMs, 'nothing left pending')],
    ['incorrect or invisible states', (v) => String(v.incorrectOrInvisible.count)],
    [
      'downstream calls (failed)',
      (v) =>
        Object.entries(v.downstreamCalls)
          .map(([k, d]) => `${k} ${d.calls} (${d.failures})`)
          .join(', '),
    ],
    ['duplicate deliveries', (v) => String(v.duplicateDeliveries)],
  ];
  const header = [
    '',
    ...variants.map((v) => (v.boundary === 'split' ? 'split (commands)' : 'all synchronous')),
  ];
  const table = [header, ...rows.map(([label, f]) => [label, ...variants.map(f)])];
  const lines = renderTable(table);
  const notes = variants.map((v) => `  ${v.boundary}: ${v.incorrectOrInvisible.evidence}`);
  return [...lines, '', 'incorrect or invisible states:', ...notes].join('\n');
}

export function formatChecks(checks: readonly CheckResult[]): string {
  return checks
    .map((c) =>
      [
        `${c.passed ? 'PASS' : 'FAIL'}  ${c.title}`,
        `      expected: ${c.expected}`,
        `      observed: ${c.observed}`,
      ].join('\n'),
    )
    .join('\n');
}

function renderTable(rows: readonly (readonly string[])[]): string[] {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  const line = (r: readonly string[]) =>
    r
      .map((cell, i) => cell.padEnd(widths[i] ?? 0))
      .join('  │  ')
      .trimEnd();
  const rule = widths.map((w) => '─'.repeat(w)).join('──┼──');
  const [head, ...body] = rows;
  return [line(head ?? []), rule, ...body.map(line)];
}

/** Writes the report as JSON under `dir` (demo/results/ by default); returns the file path. */
export function writeReport(report: ExperimentReport, dir: string): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `experiment-${report.startedAt.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  return file;
}
