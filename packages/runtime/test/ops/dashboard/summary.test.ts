import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminHandler } from '../../../src/ops/admin-handler.js';
import {
  estimateQuantile,
  LATENCY_BOUNDS_MS,
  createOutcomeWindow,
} from '../../../src/ops/dashboard/outcome-window.js';
import { shareSummary, type DashboardSummary } from '../../../src/ops/dashboard/summary.js';
import { openTempSqlite, succeed, submit, type TempSqlite } from '../support.js';

describe('estimateQuantile', () => {
  const bounds = [10, 100, 1_000];

  it('interpolates within the bucket the rank falls in, from 0 for the first', () => {
    expect(estimateQuantile([0, 0, 0, 0], bounds, 0.95)).toBeNull();
    // 100 values in [10, 100): the 95th is 95 % of the way up.
    expect(estimateQuantile([0, 100, 0, 0], bounds, 0.95)).toBe(Math.round(10 + 90 * 0.95));
    expect(estimateQuantile([10, 0, 0, 0], bounds, 0.5)).toBe(5);
    // 90 fast, 10 slow: the 95th lies halfway into the slow bucket.
    expect(estimateQuantile([90, 0, 10, 0], bounds, 0.95)).toBe(550);
  });

  it('answers the lower bound of the open last bucket: at least that long', () => {
    expect(estimateQuantile([0, 0, 0, 5], bounds, 0.95)).toBe(1_000);
  });
});

describe('the summary shared by every page', () => {
  const summary = (n: number): DashboardSummary =>
    ({ generatedAt: String(n), refreshMs: 50 }) as unknown as DashboardSummary;

  it('reads once per interval however many ask, and stops reading when nobody asks', async () => {
    let reads = 0;
    const shared = shareSummary(async () => summary(++reads), 50, 200);
    const first = await Promise.all(Array.from({ length: 20 }, () => shared.current()));
    expect(reads).toBe(1);
    expect(new Set(first.map((s) => s.generatedAt))).toEqual(new Set(['1']));
    // Many askers for a while: the timer reads, the askers only get the latest.
    for (let i = 0; i < 10; i++) {
      await Promise.all(Array.from({ length: 20 }, () => shared.current()));
      await sleep(25);
    }
    const whileAsked = reads;
    expect(whileAsked).toBeGreaterThan(1);
    expect(whileAsked).toBeLessThan(20);
    // Nobody asks: after the idle time no more reads happen at all.
    await sleep(400);
    const quiet = reads;
    await sleep(300);
    expect(reads).toBe(quiet);
    // The next one to ask after the quiet spell gets a fresh summary, not the stale one.
    expect((await shared.current()).generatedAt).toBe(String(quiet + 1));
  });
});

describe('the outcome window', () => {
  let db: TempSqlite;
  beforeAll(async () => {
    db = await openTempSqlite();
  });
  afterAll(async () => {
    await db.dispose();
  });

  it('reads a settled bucket once, and the newest ones again at each refresh', async () => {
    let outcomeReads = 0;
    const store = new Proxy(db.store, {
      get(target, property) {
        if (property === 'outcomeCounts') {
          return (params: Parameters<typeof target.outcomeCounts>[0]) => {
            outcomeReads += 1;
            return target.outcomeCounts(params);
          };
        }
        const value: unknown = Reflect.get(target, property);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    await succeed(db.store, await submit(db.store, 'a'));
    await succeed(db.store, await submit(db.store, 'a'));
    const window = createOutcomeWindow(store, 10 * 60_000, 60_000);
    // Half a minute into a bucket: the bucket before it has settled, whatever the real clock says.
    const dbNow = (await db.store.now()).getTime();
    const now = new Date(Math.ceil(dbNow / 60_000) * 60_000 + 30_000);
    const first = await window.read(now);
    expect(outcomeReads).toBe(10);
    expect(first.buckets).toHaveLength(10);
    expect(first.total.succeeded).toBe(2);
    expect(first.total.p95Ms).not.toBeNull();
    // The distribution over the window: bars from the first bound used to the last, summing to all.
    expect(first.total.distribution.reduce((n, b) => n + b.count, 0)).toBe(2);
    expect(first.total.distribution[0]!.count).toBeGreaterThan(0);
    expect(first.total.distribution.at(-1)!.count).toBeGreaterThan(0);
    expect(first.total.p50Ms).toBeLessThanOrEqual(first.total.p95Ms!);
    expect(first.total.p95Ms).toBeLessThanOrEqual(first.total.p99Ms!);
    // A minute later: nine buckets are settled, only the newest is read again.
    outcomeReads = 0;
    const later = await window.read(new Date(now.getTime() + 60_000 + 10_000));
    expect(outcomeReads).toBeLessThanOrEqual(2);
    expect(later.buckets).toHaveLength(10);
    expect(later.total.succeeded).toBe(2);
    expect(LATENCY_BOUNDS_MS.length).toBeLessThanOrEqual(64);
  });
});

describe('dashboard options', () => {
  it('are checked when the handler is built', async () => {
    const db = await openTempSqlite();
    try {
      const build = (dashboard: unknown) => () =>
        createAdminHandler({ store: db.store, auth: 'none', dashboard: dashboard as boolean });
      expect(build(true)).not.toThrow();
      expect(build(false)).not.toThrow();
      for (const bad of [
        'yes',
        { refreshMs: 10 },
        { refreshMs: 1.5 },
        { bucketMs: 60_000, windowMs: 90_000 },
        { bucketMs: 1_000, windowMs: 500_000 },
        { deadLetters: 0 },
      ]) {
        expect(build(bad), JSON.stringify(bad)).toThrow(
          expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
        );
      }
    } finally {
      await db.dispose();
    }
  });
});
