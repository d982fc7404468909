import { describe, expect, it } from 'vitest';
import { countExecutions, exactlyOnceVerdict, joinSamples } from '../src/checks.js';
import { consumerCost } from '../src/drain.js';
import { bound, compare, measurement } from '../src/report.js';
import { meets, percentile, rate, ratio, repeated, summariseLatency } from '../src/stats.js';

describe('percentile (nearest rank)', () => {
  const sample = Array.from({ length: 100 }, (_, i) => 100 - i); // 100 … 1, unsorted on purpose

  it('picks the nearest-rank value of an unsorted sample', () => {
    expect(percentile(sample, 50)).toBe(50);
    expect(percentile(sample, 95)).toBe(95);
    expect(percentile(sample, 99)).toBe(99);
    expect(percentile(sample, 100)).toBe(100);
    expect(percentile(sample, 0)).toBe(1);
  });

  it('handles tiny and empty samples and leaves the input unsorted', () => {
    const one = [7];
    expect(percentile(one, 99)).toBe(7);
    expect(percentile([3, 1, 2], 50)).toBe(2);
    expect(percentile([], 50)).toBeNaN();
    const input = [3, 1, 2];
    percentile(input, 50);
    expect(input).toEqual([3, 1, 2]);
  });

  it('rejects a percentile outside 0..100', () => {
    expect(() => percentile([1], 101)).toThrow(RangeError);
    expect(() => percentile([1], -1)).toThrow(RangeError);
  });

  it('summarises a latency sample', () => {
    expect(summariseLatency([5, 1, 3, 2, 4])).toEqual({ count: 5, p50: 3, p95: 5, p99: 5, max: 5 });
  });
});

describe('rates and ratios', () => {
  it('computes items per second', () => {
    expect(rate(20_000, 4_000)).toBe(5_000);
    expect(rate(1, 0)).toBeNaN();
  });

  it('refuses ratios against a missing or non-positive baseline', () => {
    expect(ratio(3, 2)).toBe(1.5);
    expect(ratio(3, 0)).toBeNaN();
    expect(ratio(Number.NaN, 2)).toBeNaN();
  });

  it('reports the median and spread of repeats, ignoring failed runs', () => {
    const r = repeated([100, Number.NaN, 120, 80]);
    expect(r.median).toBe(100);
    expect(r.min).toBe(80);
    expect(r.max).toBe(120);
    expect(r.spread).toBeCloseTo(0.4);
    expect(repeated([1, 2]).median).toBe(1.5);
    expect(repeated([Number.NaN]).median).toBeNaN();
  });

  it('judges targets, and says n/a for a missing figure', () => {
    expect(meets(1.3, { atLeast: 1.25 })).toBe(true);
    expect(meets(1.2, { atLeast: 1.25 })).toBe(false);
    expect(meets(2.5, { atMost: 2 })).toBe(false);
    expect(meets(Number.NaN, { atLeast: 1 })).toBeNull();
    expect(meets(1, {})).toBeNull();
  });

  it('pairs repeats: the ratio is taken per repeat, then summarised', () => {
    const ours = measurement('s', 'drain', 'asynccmd', 'jobs/s');
    const theirs = measurement('s', 'drain', 'graphile-worker', 'jobs/s');
    ours.runs.push(3000, 1500, Number.NaN);
    theirs.runs.push(2000, 1000, 1000);
    const c = compare('s', 'asynccmd / graphile', ours, theirs, { atLeast: 1.25 });
    expect(c.ratio.runs).toEqual([1.5, 1.5]);
    expect(c.ratio.median).toBe(1.5);
    expect(c.met).toBe(true);
  });

  it('checks an absolute bound on the median of repeats', () => {
    const p99 = measurement('s', 'latency', 'IMMEDIATE', 'ms');
    p99.runs.push(1.5, 2.5, 1.8);
    const c = bound('s', 'IMMEDIATE p99', p99, { atMost: 2 });
    expect(c.ratio.median).toBe(1.8);
    expect(c.met).toBe(true);
  });
});

describe('run checks', () => {
  const clean = {
    commands: 10,
    succeededOnce: 10,
    ranTwice: 0,
    succeededNotRun: 0,
    ranNotSucceeded: 0,
    pendingNotRun: 0,
    strays: 0,
    other: 0,
  };

  it('passes a drain in which every command ran exactly once', () => {
    expect(exactlyOnceVerdict(10, clean)).toBe('exactly once 10/10 ✓');
  });

  it('fails a drain with a double execution, a lost completion, a phantom success or a stray run', () => {
    expect(() => exactlyOnceVerdict(10, { ...clean, succeededOnce: 9, ranTwice: 1 })).toThrow(
      /FAILED.*ranTwice 1/,
    );
    expect(() => exactlyOnceVerdict(10, { ...clean, succeededOnce: 9, ranNotSucceeded: 1 })).toThrow(
      /FAILED/,
    );
    expect(() => exactlyOnceVerdict(10, { ...clean, succeededOnce: 9, succeededNotRun: 1 })).toThrow(
      /FAILED/,
    );
    expect(() => exactlyOnceVerdict(10, { ...clean, strays: 1 })).toThrow(/strays 1/);
    expect(() => exactlyOnceVerdict(10, { ...clean, succeededOnce: 9, other: 1 })).toThrow(/other 1/);
    expect(() => exactlyOnceVerdict(11, clean)).toThrow(/11 enqueued/);
  });

  it('accepts untouched PENDING commands only in a drain stopped at its time cap', () => {
    const capped = { ...clean, succeededOnce: 6, pendingNotRun: 4 };
    expect(() => exactlyOnceVerdict(10, capped)).toThrow(/FAILED/);
    expect(exactlyOnceVerdict(10, capped, false)).toMatch(/capped: 6\/10 ran, each exactly once/);
    expect(() => exactlyOnceVerdict(10, { ...capped, ranTwice: 1 }, false)).toThrow(/FAILED/);
  });

  it('joins commit and start times by sequence number, dropping the warm-up', () => {
    const r = joinSamples([1, 2, 3], [100, 200, 300], [3, 1, 2], [301.5, 102, 200.25], 1);
    expect(r.samples).toEqual([0.25, 1.5]);
  });

  it('fails a latency run in which a command started twice or never', () => {
    expect(() => joinSamples([1], [100], [1, 1], [101, 102], 0)).toThrow(/started twice/);
    expect(() => joinSamples([1, 2], [100, 200], [1], [101], 0)).toThrow(/never started/);
  });

  it('counts executions against the command rows in memory as the SQL checks do', () => {
    const rows = [
      { seq: 1, status: 'SUCCESS' },
      { seq: 2, status: 'SUCCESS' },
      { seq: 3, status: 'RUNNING' },
      { seq: 4, status: 'SUCCESS' },
      { seq: 5, status: 'PENDING' },
      { seq: 6, status: 'DEAD' },
    ];
    expect(countExecutions(rows, [1, 2, 2, 3, 9])).toEqual({
      commands: 6,
      succeededOnce: 1,
      ranTwice: 1,
      succeededNotRun: 1,
      ranNotSucceeded: 1,
      pendingNotRun: 1,
      strays: 1,
      other: 1,
    });
    const clean = countExecutions([{ seq: 1, status: 'SUCCESS' }], [1]);
    expect(exactlyOnceVerdict(1, clean)).toBe('exactly once 1/1 ✓');
  });

  it('sums consumer CPU per command over processes and keeps the largest peak RSS', () => {
    const cost = consumerCost(
      [
        { cpuMicros: 3_000, peakRssKb: 70 * 1024 },
        { cpuMicros: 1_000, peakRssKb: 90 * 1024 },
      ],
      40,
    );
    expect(cost).toEqual({ cpuUsPerCommand: 100, peakRssMb: 90 });
    expect(consumerCost([{}], 10).cpuUsPerCommand).toBeNaN();
  });
});
