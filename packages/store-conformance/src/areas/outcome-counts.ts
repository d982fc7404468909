import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import type { CommandRecord, CommandStore, OutcomeCount, OutcomeCountParams } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  freshToken,
  later,
  newCommand,
  rejectionCode,
  submitOne,
  uniqueType,
  untilDatabaseClockPasses,
  useArea,
} from '../support.js';
import { commandIn } from './admin.js';

const BOUNDS = [1, 10, 100, 1_000, 10_000];

/** What outcomeCounts must answer for these rows, judged from the rows' own times. */
function expectedCounts(
  records: readonly CommandRecord[],
  from: Date,
  to: Date,
  bounds: readonly number[],
): OutcomeCount[] {
  const tally = new Map<string, OutcomeCount>();
  for (const r of records) {
    if ((r.status !== 'SUCCESS' && r.status !== 'DEAD') || r.finishedAt === null) continue;
    const finished = r.finishedAt.getTime();
    if (finished < from.getTime() || finished >= to.getTime()) continue;
    const latency = finished - r.createdAt.getTime();
    const latencyBucket = bounds.filter((b) => b <= latency).length;
    const key = `${r.status}/${latencyBucket}`;
    const count = (tally.get(key)?.count ?? 0) + 1;
    tally.set(key, { status: r.status, latencyBucket, count });
  }
  return [...tally.values()].sort((a, b) =>
    a.status === b.status ? a.latencyBucket - b.latencyBucket : a.status < b.status ? -1 : 1,
  );
}

/** A command that succeeds only once the database clock is `waitMs` past its submit. */
async function slowSuccess<Tx>(store: CommandStore<Tx>, waitMs: number): Promise<string> {
  const id = await submitOne(store, newCommand(uniqueType('slow')));
  const created = (await store.get(id))?.createdAt;
  if (!created) throw new Error('submitted command not found');
  await untilDatabaseClockPasses(store, new Date(created.getTime() + waitMs));
  const c = await store.claimById({ id, now: later(), token: freshToken(), leaseMs: 60_000 });
  if (!c) throw new Error('could not claim the slow command');
  expect(await store.complete([{ id, token: c.claimToken }])).toEqual([id]);
  return id;
}

/**
 * Outcome counts (throughput and submit-to-outcome latency of a time range) answer for the whole
 * table; each test reads only the range its own rows finished in, taken on the database clock.
 */
export function outcomeCountsArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('outcome counts', () => {
    const ctx = useArea(factory, adapter, 'occ');

    /** Runs `work` and returns its rows with a range [from, to) that holds every finish of theirs. */
    async function finishedWithin(work: () => Promise<string[]>) {
      const store = ctx.store();
      const from = await store.now();
      const ids = await work();
      const records = await store.getMany(ids);
      const last = Math.max(from.getTime(), ...records.map((r) => r.finishedAt?.getTime() ?? 0));
      await untilDatabaseClockPasses(store, new Date(last));
      return { records, from, to: await store.now() };
    }

    it('counts SUCCESS and DEAD finished in the range by latency bucket, and nothing else', async () => {
      const store = ctx.store();
      const { records, from, to } = await finishedWithin(async () => [
        (await commandIn(store, 'SUCCESS')).id,
        (await commandIn(store, 'SUCCESS')).id,
        (await commandIn(store, 'DEAD')).id,
        (await commandIn(store, 'CANCELLED')).id,
        (await commandIn(store, 'RUNNING')).id,
        (await commandIn(store, 'PENDING')).id,
        await slowSuccess(store, 120),
      ]);
      const expected = expectedCounts(records, from, to, BOUNDS);
      expect(expected.reduce((n, c) => n + c.count, 0)).toBe(4);
      // The slow one waited past the 100 ms bound.
      expect(expected.some((c) => c.status === 'SUCCESS' && c.latencyBucket >= 3)).toBe(true);
      expect(await store.outcomeCounts({ from, to, latencyBoundsMs: BOUNDS })).toEqual(expected);
      // No bounds: one bucket.
      expect(await store.outcomeCounts({ from, to, latencyBoundsMs: [] })).toEqual([
        { status: 'DEAD', latencyBucket: 0, count: 1 },
        { status: 'SUCCESS', latencyBucket: 0, count: 3 },
      ]);
    });

    it('takes `from` inclusive and `to` exclusive, and an empty range counts nothing', async () => {
      const store = ctx.store();
      const { records } = await finishedWithin(async () => {
        const ids: string[] = [];
        for (let i = 0; i < 3; i++) {
          ids.push((await commandIn(store, i === 1 ? 'DEAD' : 'SUCCESS')).id);
          const finished = (await store.get(ids[i]!))?.finishedAt;
          // Each finishes on a later millisecond than the one before.
          if (finished) await untilDatabaseClockPasses(store, finished);
        }
        return ids;
      });
      const times = records.map((r) => r.finishedAt as Date).sort((a, b) => a.getTime() - b.getTime());
      const [first, second, third] = times as [Date, Date, Date];
      for (const [from, to] of [
        [first, second],
        [second, third],
        [first, new Date(third.getTime() + 1)],
        [second, second],
      ] as const) {
        expect(await store.outcomeCounts({ from, to, latencyBoundsMs: BOUNDS })).toEqual(
          expectedCounts(records, from, to, BOUNDS),
        );
      }
      expect(await store.outcomeCounts({ from: second, to: second, latencyBoundsMs: BOUNDS })).toEqual([]);
    });

    it('forgets a dead letter once it is retried or killed', async () => {
      const store = ctx.store();
      const { records, from, to } = await finishedWithin(async () => [
        (await commandIn(store, 'DEAD')).id,
        (await commandIn(store, 'DEAD')).id,
      ]);
      expect(await store.outcomeCounts({ from, to, latencyBoundsMs: [] })).toEqual([
        { status: 'DEAD', latencyBucket: 0, count: 2 },
      ]);
      const [retried, killed] = records as [CommandRecord, CommandRecord];
      expect(E.isRight(await store.retry(retried.id, new Date()))).toBe(true);
      expect(E.isRight(await store.kill(killed.id, 'handled'))).toBe(true);
      expect(await store.outcomeCounts({ from, to, latencyBoundsMs: [] })).toEqual([]);
    });

    it('refuses a range or bounds that are not ones with INVALID_ARGUMENT', async () => {
      const store = ctx.store();
      const now = new Date();
      const bad: unknown[] = [
        null,
        { from: new Date('nope'), to: now, latencyBoundsMs: [] },
        { from: now, to: 'now', latencyBoundsMs: [] },
        { from: now, to: new Date(now.getTime() - 1), latencyBoundsMs: [] },
        { from: now, to: now, latencyBoundsMs: 'fast' },
        { from: now, to: now, latencyBoundsMs: [10, 10] },
        { from: now, to: now, latencyBoundsMs: [10, 5] },
        { from: now, to: now, latencyBoundsMs: [-1] },
        { from: now, to: now, latencyBoundsMs: [1.5] },
        { from: now, to: now, latencyBoundsMs: [Number.NaN] },
        { from: now, to: now, latencyBoundsMs: [1e13] },
        { from: now, to: now, latencyBoundsMs: Array.from({ length: 65 }, (_, i) => i) },
      ];
      for (const params of bad) {
        expect(
          await rejectionCode(store.outcomeCounts(params as OutcomeCountParams)),
          JSON.stringify(params),
        ).toBe('INVALID_ARGUMENT');
      }
    });
  });
}
