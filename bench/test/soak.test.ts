import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { soakChartSpec, soakPoints, writeSoakChart } from '../src/soak/chart.js';
import { soakComparisons } from '../src/soak/report.js';
import type { SoakRun } from '../src/soak/run.js';
import {
  bucketOf,
  bucketUpperMs,
  heldVerdicts,
  histogramPercentile,
  merge,
  record,
  soakTiming,
  soakVerdicts,
  submittedRate,
  windowRows,
  type Histogram,
  type SoakWindow,
} from '../src/soak/windows.js';

/** A window of `seconds` ending at `endS`, every command started `latencyMs` after its submit. */
function window(endS: number, over: Partial<SoakWindow> & { latencyMs?: number } = {}): SoakWindow {
  const seconds = over.seconds ?? 60;
  const drained = over.drained ?? 1000 * seconds;
  const h: Histogram = new Map();
  for (let i = 0; i < 100; i++) record(h, over.latencyMs ?? 10);
  return {
    endS,
    seconds,
    submitted: over.submitted ?? 1000 * seconds,
    drained,
    backlog: over.backlog ?? 0,
    latency: [...h.entries()],
    totalBytes: over.totalBytes ?? 100,
    deadTuples: over.deadTuples ?? 0,
    autovacuums: over.autovacuums ?? 0,
    held: over.held ?? false,
  };
}

const minutes = (n: number, f: (m: number) => Partial<SoakWindow> & { latencyMs?: number } = () => ({})) =>
  Array.from({ length: n }, (_, i) => window((i + 1) * 60, f(i + 1)));

describe('soak timing', () => {
  it('keeps the issue lengths in a full run, the hold in the middle', () => {
    expect(soakTiming(30, 'held', false)).toEqual({
      durationS: 1800,
      windowS: 30,
      spanS: 300,
      retentionS: 600,
      purgeIntervalS: 60,
      holdStartS: 840,
      holdS: 120,
    });
    expect(soakTiming(30, 'autovacuum', false)).toMatchObject({ windowS: 60, holdS: 0, holdStartS: 0 });
  });

  it('shrinks every length by minutes / 30 under --quick', () => {
    expect(soakTiming(2, 'held', true)).toEqual({
      durationS: 120,
      windowS: 2,
      spanS: 20,
      retentionS: 40,
      purgeIntervalS: 4,
      holdStartS: 56,
      holdS: 8,
    });
    // Without --quick a short run keeps full-length windows and retention.
    expect(soakTiming(2, 'held', false)).toMatchObject({ windowS: 30, holdS: 120, retentionS: 600 });
  });
});

describe('latency histogram', () => {
  it('puts a sample in the 2 % bucket whose bound is at or above it', () => {
    for (const ms of [0.5, 1, 37.3, 1000, 60_000]) {
      const b = bucketOf(ms);
      expect(bucketUpperMs(b)).toBeGreaterThanOrEqual(ms * 0.999_999);
      expect(bucketUpperMs(b - 1)).toBeLessThan(ms);
    }
    expect(bucketOf(0)).toBe(0);
  });

  it('reads percentiles from pooled histograms, NaN when empty', () => {
    const a: Histogram = new Map();
    const b: Histogram = new Map();
    for (let i = 1; i <= 98; i++) record(a, 1);
    record(b, 500);
    record(b, 2000);
    const pooled = merge([[...a.entries()], [...b.entries()]]);
    expect(histogramPercentile(pooled, 50)).toBeCloseTo(1, 1);
    expect(histogramPercentile(pooled, 99)).toBeGreaterThanOrEqual(500);
    expect(histogramPercentile(pooled, 99)).toBeLessThan(511);
    expect(histogramPercentile(pooled, 100)).toBeGreaterThanOrEqual(2000);
    expect(histogramPercentile(new Map(), 99)).toBeNaN();
  });
});

describe('soak verdicts', () => {
  const t = soakTiming(30, 'autovacuum', false);

  it('compares the last 5 minutes with the first, and the size at 30 with 15 minutes', () => {
    const windows = minutes(30, (m) => ({
      drained: m > 25 ? 45_000 : 60_000,
      latencyMs: m > 25 ? 40 : 10,
      totalBytes: 1000 + m * 10,
    }));
    const [throughput, size, p99] = soakVerdicts(windows, t);
    expect(throughput).toMatchObject({
      label: 'drained/s, last 5 min / first 5 min',
      target: { atLeast: 0.95 },
    });
    expect(throughput?.value).toBeCloseTo(0.75);
    expect(size?.label).toBe('total size, 30 min / 15 min');
    expect(size?.value).toBeCloseTo(1300 / 1150);
    expect(p99?.value).toBeGreaterThan(3.9);
    expect(p99?.value).toBeLessThan(4.1);
  });

  it('judges the held windows by what was submitted in each, the backlog by 10 s of submits', () => {
    const held = soakTiming(30, 'held', false);
    const windows = Array.from({ length: 60 }, (_, i) => {
      const endS = (i + 1) * 30;
      const inHold = endS > held.holdStartS && endS - 30 < held.holdStartS + held.holdS;
      return window(endS, {
        seconds: 30,
        submitted: 30_000,
        drained: inHold ? 15_000 : 30_000,
        backlog: inHold ? 40_000 : 100,
        latencyMs: inHold ? 3000 : 20,
        held: inHold,
      });
    });
    expect(windows.filter((w) => w.held)).toHaveLength(4);
    expect(submittedRate(windows)).toBe(1000);
    const [drain, backlog, p99] = heldVerdicts(windows);
    expect(drain?.value).toBe(0.5);
    expect(backlog?.value).toBe(4);
    expect(p99?.value).toBeGreaterThanOrEqual(3000);
    expect(p99?.unit).toBe(' ms');
  });

  it('has no held verdict value without held windows', () => {
    expect(heldVerdicts(minutes(3)).map((v) => v.value)).toEqual([NaN, NaN, NaN]);
  });
});

function run(variant: SoakRun['variant'], database: SoakRun['database'] = 'PostgreSQL'): SoakRun {
  return {
    database,
    deadMeaning: 'n_dead_tup',
    system: 'asynccmd',
    label: 'asynccmd defaults, retention',
    settings: '',
    variant,
    server: 'test',
    timing: soakTiming(3, variant, false),
    submitRate: 1000,
    measuredDrain: { asynccmd: 1500 },
    windows: minutes(3, (m) => ({ totalBytes: m * 1024 * 1024 })),
    verdicts: soakVerdicts(minutes(3), soakTiming(3, variant, false)),
    errors: [],
  };
}

describe('soak report and chart', () => {
  it('prints one row per window and turns verdicts into the report comparisons', () => {
    const rows = windowRows(minutes(2));
    expect(rows[0]?.[0]).toBe('until s');
    expect(rows[1]).toEqual(['60', '1,000', '1,000', '0', '10.0', '0.0', '0', '0', '']);
    const comparisons = soakComparisons([run('autovacuum')]);
    expect(comparisons[0]).toMatchObject({
      section: 'PostgreSQL: soak, autovacuum at its defaults',
      label: 'asynccmd defaults, retention: drained/s, last 5 min / first 5 min',
      met: true,
    });
    expect(soakComparisons([run('held', 'MariaDB')])[0]?.section).toBe(
      'MariaDB: soak, a REPEATABLE READ snapshot held',
    );
  });

  it('draws every measure of every window, and renders it to SVG beside the JSON', async () => {
    const points = soakPoints([run('autovacuum'), run('no-autovacuum')]);
    expect(points).toHaveLength(2 * 3 * 5);
    expect(points.find((p) => p.measure === 'table + index + TOAST (MB)' && p.second === 180)?.value).toBe(3);
    expect(soakChartSpec([run('held')]).title).toMatchObject({ text: expect.stringContaining('Soak') });
    const dir = mkdtempSync(join(tmpdir(), 'bench-soak-chart-'));
    try {
      const written = await writeSoakChart([run('autovacuum'), run('held')], join(dir, 'r.json'));
      expect(written).toEqual({ file: join(dir, 'r-soak.svg') });
      const svg = readFileSync(join(dir, 'r-soak.svg'), 'utf8');
      expect(svg).toMatch(/^<svg[^>]*>.*drained\/s/s);
      // The held run's snapshot is shaded: a rect mark in its panels.
      expect(svg).toContain('mark-rect');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
