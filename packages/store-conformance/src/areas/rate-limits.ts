import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { LIMITS } from '@asynccmd/core';
import type { CommandStore, RateLimitStore } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import { rejectionCode, uniqueType, useArea } from '../support.js';

function ratesOf<Tx>(store: CommandStore<Tx>): RateLimitStore {
  if (!store.rateLimits) throw new Error(`the ${store.dialect} store keeps no rate limits`);
  return store.rateLimits;
}

/** A time well after the database clock: takes at it refill exactly as far as the test says. */
async function aheadOfDatabase<Tx>(store: CommandStore<Tx>): Promise<number> {
  return (await store.now()).getTime() + 60_000;
}

/**
 * Rate limits per type: one token bucket per type in the database, refilled by elapsed database
 * time at (maxStarts − burst) / periodMs up to burst; takes grant whole tokens atomically, however
 * many take at once; unused tokens come back, worth less for each moment they were out.
 */
export function rateLimitsArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('rate limits', () => {
    const ctx = useArea(factory, adapter, 'rate');

    it('stores limits (a tenth of maxStarts as the default burst), last declaration wins, refuses bad ones before writing', async () => {
      const rates = ratesOf(ctx.store());
      const [a, b] = [uniqueType('a'), uniqueType('b')];
      await rates.declare([
        { type: a, maxStarts: 100, periodMs: 60_000 },
        { type: b, maxStarts: 5, periodMs: 1_000, burst: 4 },
      ]);
      await rates.declare([{ type: a, maxStarts: 30, periodMs: 2_000, burst: 7 }]);
      const mine = async () => (await rates.list()).filter((l) => l.type === a || l.type === b);
      const expected = [
        { type: a, maxStarts: 30, periodMs: 2_000, burst: 7, tokens: 7 },
        { type: b, maxStarts: 5, periodMs: 1_000, burst: 4, tokens: 4 },
      ].sort((x, y) => (x.type < y.type ? -1 : 1));
      expect(await mine()).toEqual(expected);
      const c = uniqueType('c');
      const bad: unknown[] = [
        { maxStarts: 0, periodMs: 1_000 },
        { maxStarts: -5, periodMs: 1_000 },
        { maxStarts: 1.5, periodMs: 1_000 },
        { maxStarts: 1, periodMs: 1_000 }, // a bucket of burst 1 that never refills
        { maxStarts: '10', periodMs: 1_000 },
        { maxStarts: 10, periodMs: 0 },
        { maxStarts: 10, periodMs: 0.5 },
        { maxStarts: 10, periodMs: -1 },
        { maxStarts: 10, periodMs: LIMITS.ratePeriodMs + 1 },
        { maxStarts: 10, periodMs: 1_000, burst: 0 },
        { maxStarts: 10, periodMs: 1_000, burst: 10 },
        { maxStarts: 10, periodMs: 1_000, burst: 2.5 },
        { maxStarts: 10, periodMs: 1_000, rate: 3 },
      ];
      for (const spec of bad) {
        const limits = [
          { type: c, maxStarts: 10, periodMs: 1_000 },
          { type: a, ...(spec as object) },
        ] as Parameters<RateLimitStore['declare']>[0];
        expect(await rejectionCode(rates.declare(limits))).toBe('INVALID_ARGUMENT');
      }
      expect(await rejectionCode(rates.declare([{ type: '', maxStarts: 10, periodMs: 1 }]))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(
        await rejectionCode(
          rates.declare([
            { type: c, maxStarts: 10, periodMs: 1_000 },
            { type: c, maxStarts: 20, periodMs: 1_000 },
          ]),
        ),
      ).toBe('INVALID_ARGUMENT');
      // Nothing was written: not c, and a as it was.
      expect((await rates.list()).some((l) => l.type === c)).toBe(false);
      expect(await mine()).toEqual(expected);
    });

    it('refills by elapsed time at (maxStarts − burst) / periodMs, up to the burst, and grants whole tokens', async () => {
      const rates = ratesOf(ctx.store());
      const type = uniqueType('refill');
      // 20 per 2 s with a burst of 4: 16 tokens per 2 s, one every 125 ms.
      await rates.declare([{ type, maxStarts: 20, periodMs: 2_000, burst: 4 }]);
      const at = await aheadOfDatabase(ctx.store());
      const take = (want: number, ms: number) => rates.take({ type, want, now: new Date(at + ms) });
      expect(await take(10, 0)).toMatchObject({ granted: 4, nextTokenInMs: 125 });
      expect(await take(10, 375)).toMatchObject({ granted: 3, nextTokenInMs: 125 });
      expect(await take(10, 375)).toMatchObject({ granted: 0, nextTokenInMs: 125 });
      expect(await take(10, 425)).toMatchObject({ granted: 0, nextTokenInMs: 75 });
      // A time before the last refill refills nothing (the bucket never runs backwards).
      expect(await take(10, 100)).toMatchObject({ granted: 0, nextTokenInMs: 75 });
      expect(await take(2, 500)).toMatchObject({ granted: 1, nextTokenInMs: 125 });
      // However long it stayed untouched, it holds no more than the burst.
      const full = await take(1, 60_000);
      expect(full).toMatchObject({ granted: 1, nextTokenInMs: 0 });
      expect(full.takenAt?.getTime()).toBe(at + 60_000);
      expect(await take(10, 60_000)).toMatchObject({ granted: 3, nextTokenInMs: 125 });
    });

    it('refills on the database clock when the take names no time', async () => {
      const store = ctx.store();
      const rates = ratesOf(store);
      const type = uniqueType('clock');
      // 10 tokens a second: one every 100 ms, up to 10.
      await rates.declare([{ type, maxStarts: 20, periodMs: 1_000, burst: 10 }]);
      const before = performance.now();
      const first = await rates.take({ type, want: 100 });
      const firstDone = performance.now();
      expect(first.granted).toBe(10);
      expect(first.nextTokenInMs).toBeGreaterThan(0);
      expect(first.nextTokenInMs).toBeLessThanOrEqual(100);
      const dbNow = (await store.now()).getTime();
      expect(Math.abs((first.takenAt?.getTime() ?? 0) - dbNow)).toBeLessThan(5_000);
      await sleep(350);
      const secondSent = performance.now();
      const second = await rates.take({ type, want: 100 });
      const secondDone = performance.now();
      // The database time between the two takes lies within what the test measured around them.
      expect(second.granted).toBeGreaterThanOrEqual(Math.floor((secondSent - firstDone) / 100));
      expect(second.granted).toBeLessThanOrEqual(Math.min(10, Math.ceil((secondDone - before) / 100)));
      expect(second.granted).toBeGreaterThanOrEqual(3);
    });

    it('never grants more than the bucket holds, however many take at once (8 takes of 10 from a bucket of 20)', async () => {
      const type = uniqueType('race');
      // A refill of one token a week: in the test's time the bucket is what it started with.
      await ratesOf(ctx.store()).declare([{ type, maxStarts: 21, periodMs: LIMITS.ratePeriodMs, burst: 20 }]);
      const peers = await Promise.all([1, 2, 3, 4].map(() => ctx.harness().openPeer()));
      try {
        const takers = [ctx.store(), ...peers, ...peers.slice(0, 3)];
        const grants = await Promise.all(takers.map((s) => ratesOf(s).take({ type, want: 10 })));
        expect(grants.reduce((n, g) => n + g.granted, 0)).toBe(20);
        for (const g of grants) expect(g.granted).toBeGreaterThanOrEqual(0);
        expect(await ratesOf(ctx.store()).take({ type, want: 10 })).toMatchObject({ granted: 0 });
      } finally {
        await Promise.all(peers.map((p) => p.close()));
      }
    });

    it('takes back unused tokens, worth less what the bucket refilled since the take, never above the burst', async () => {
      const rates = ratesOf(ctx.store());
      const type = uniqueType('back');
      await rates.declare([{ type, maxStarts: 20, periodMs: 2_000, burst: 4 }]);
      const at = await aheadOfDatabase(ctx.store());
      const taken = await rates.take({ type, want: 4, now: new Date(at) });
      expect(taken.granted).toBe(4);
      const takenAt = taken.takenAt as Date;
      await rates.giveBack(type, 3, takenAt);
      expect(await rates.take({ type, want: 10, now: new Date(at) })).toMatchObject({ granted: 3 });
      // Given back as if taken 250 ms earlier: 2 tokens refilled meanwhile, so 4 − 2 come back.
      await rates.giveBack(type, 4, new Date(at - 250));
      expect(await rates.take({ type, want: 10, now: new Date(at) })).toMatchObject({ granted: 2 });
      // More than the burst comes back as the burst; nothing, as nothing.
      await rates.giveBack(type, 100, takenAt);
      await rates.giveBack(type, 0, takenAt);
      expect(await rates.take({ type, want: 10, now: new Date(at) })).toMatchObject({ granted: 4 });
      expect(await rejectionCode(rates.giveBack(type, -1, takenAt))).toBe('INVALID_ARGUMENT');
      expect(await rejectionCode(rates.giveBack(type, 1.5, takenAt))).toBe('INVALID_ARGUMENT');
      expect(await rejectionCode(rates.giveBack(type, 1, new Date(NaN)))).toBe('INVALID_ARGUMENT');
    });

    it('a declaration again keeps the bucket (no fresh burst for each instance that starts), at most the new burst', async () => {
      const rates = ratesOf(ctx.store());
      const type = uniqueType('again');
      await rates.declare([{ type, maxStarts: 20, periodMs: 2_000, burst: 4 }]);
      const at = await aheadOfDatabase(ctx.store());
      expect(await rates.take({ type, want: 3, now: new Date(at) })).toMatchObject({ granted: 3 });
      await rates.declare([{ type, maxStarts: 20, periodMs: 2_000, burst: 4 }]);
      expect(await rates.take({ type, want: 10, now: new Date(at) })).toMatchObject({ granted: 1 });
      await rates.giveBack(type, 4, new Date(at));
      await rates.declare([{ type, maxStarts: 10, periodMs: 2_000, burst: 2 }]);
      expect((await rates.list()).find((l) => l.type === type)).toEqual({
        type,
        maxStarts: 10,
        periodMs: 2_000,
        burst: 2,
        tokens: 2,
      });
    });

    it('grants nothing for a type without a stored limit, and refuses a bad take', async () => {
      const rates = ratesOf(ctx.store());
      const type = uniqueType('none');
      expect(await rates.take({ type, want: 5 })).toEqual({ granted: 0, nextTokenInMs: null, takenAt: null });
      await rates.giveBack(type, 5, new Date());
      expect((await rates.list()).some((l) => l.type === type)).toBe(false);
      for (const want of [0, -1, 1.5, '3' as unknown as number]) {
        expect(await rejectionCode(rates.take({ type, want }))).toBe('INVALID_ARGUMENT');
      }
      expect(await rejectionCode(rates.take({ type: '', want: 1 }))).toBe('INVALID_ARGUMENT');
      expect(await rejectionCode(rates.take({ type, want: 1, now: new Date(NaN) }))).toBe('INVALID_ARGUMENT');
    });
  });
}
