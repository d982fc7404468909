import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import { rescueLimitMessage } from '@asynccmd/core/store-kit';
import type { ClaimedCommand, CommandStore } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  claim,
  claimOne,
  newCommand,
  submit,
  submitOne,
  uniqueType,
  untilDatabaseClockPasses,
  useArea,
} from '../support.js';

/** Every test of this area runs alone on its namespace: drain what earlier tests left expiring. */
async function drainExpired<Tx>(store: CommandStore<Tx>): Promise<void> {
  while ((await store.reclaimHung({ limit: 1000, maxRescues: 1000 })).length > 0);
}

async function expire<Tx>(store: CommandStore<Tx>, claims: readonly ClaimedCommand[]): Promise<void> {
  const latest = Math.max(...claims.map((c) => c.leaseUntil!.getTime()));
  await untilDatabaseClockPasses(store, new Date(latest));
}

export function reclaimArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('reclaim of hung commands', () => {
    const ctx = useArea(factory, adapter, 'rcl');

    it('judges leases on the database clock: a huge application `now` does not make a live claim hung', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type));
      // The claim is made with an application clock far in the future and a long lease.
      const c = await claimOne(store, type, { now: new Date(8.64e15), leaseMs: 600_000 });
      const reclaimed = await store.reclaimHung({ limit: 1000, maxRescues: 5 });
      expect(reclaimed.map((r) => r.id)).not.toContain(id);
      expect(await store.get(id)).toMatchObject({ status: 'RUNNING', claimToken: c.claimToken });
    });

    it('a short lease is hung only once the database clock has passed it; then it is due again at once', async () => {
      const store = ctx.store();
      await drainExpired(store);
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type));
      const c = await claimOne(store, type, { now: new Date(8.64e15), leaseMs: 150 });
      const early = await store.now();
      if (early.getTime() <= c.leaseUntil!.getTime()) {
        // Still inside the lease on the database clock: not hung, whatever the application clock says.
        const none = await store.reclaimHung({ limit: 1000, maxRescues: 5 });
        const stillInside = (await store.now()).getTime() <= c.leaseUntil!.getTime();
        if (stillInside) expect(none.map((r) => r.id)).not.toContain(id);
      }
      await expire(store, [c]);
      const reclaimed = await store.reclaimHung({ limit: 1000, maxRescues: 5 });
      expect(reclaimed).toEqual([{ id, type, status: 'PENDING' }]);
      const dbNow = await store.now();
      const back = await store.get(id);
      expect(back).toMatchObject({
        status: 'PENDING',
        rescueCount: 1,
        retryCount: 0,
        claimToken: null,
        leaseUntil: null,
      });
      expect(back!.nextRunAt.getTime()).toBeLessThanOrEqual(dbNow.getTime());
      // The silent instance's late outcome is fenced out; a new claim gets it.
      expect(await store.complete([{ id, token: c.claimToken }])).toEqual([]);
      const again = await claimOne(store, type, { now: dbNow });
      expect(again.id).toBe(id);
      expect(await store.complete([{ id, token: again.claimToken }])).toEqual([id]);
    });

    it('an orphan keeps its place: reclaimed, it keeps its due time and runs before work due after it', async () => {
      const store = ctx.store();
      await drainExpired(store);
      const type = uniqueType();
      const dueAt = new Date(Date.now() - 60_000);
      const orphan = await submitOne(store, newCommand(type, { runAt: dueAt }));
      const c = await claimOne(store, type, { leaseMs: 1, now: new Date() });
      const newer = await submitOne(store, newCommand(type, { runAt: new Date(Date.now() - 30_000) }));
      await expire(store, [c]);
      expect(await store.reclaimHung({ limit: 1000, maxRescues: 5 })).toEqual([
        { id: orphan, type, status: 'PENDING' },
      ]);
      expect((await store.get(orphan))!.nextRunAt.getTime()).toBe(dueAt.getTime());
      const [first, second] = await claim(store, type, { now: new Date() });
      expect([first?.id, second?.id]).toEqual([orphan, newer]);
    });

    it('leaves heartbeating commands alone', async () => {
      const store = ctx.store();
      await drainExpired(store);
      const type = uniqueType();
      const [silent, alive] = await submit(store, [newCommand(type), newCommand(type)]);
      const claimed = await claim(store, type, { leaseMs: 30 });
      const aliveClaim = claimed.find((c) => c.id === alive)!;
      const held = await store.heartbeat([{ id: alive!, token: aliveClaim.claimToken }], 600_000);
      expect(held).toHaveLength(1);
      await expire(store, claimed);
      const reclaimed = await store.reclaimHung({ limit: 1000, maxRescues: 5 });
      expect(reclaimed.map((r) => r.id)).toEqual([silent]);
      expect(await store.get(alive!)).toMatchObject({ status: 'RUNNING', claimToken: aliveClaim.claimToken });
      expect(await store.complete([{ id: alive!, token: aliveClaim.claimToken }])).toEqual([alive]);
    });

    it('never touches a command that finished meanwhile', async () => {
      const store = ctx.store();
      await drainExpired(store);
      const type = uniqueType();
      await submit(store, [newCommand(type), newCommand(type)]);
      const claimed = await claim(store, type, { leaseMs: 1 });
      await store.complete([{ id: claimed[0]!.id, token: claimed[0]!.claimToken }]);
      await expire(store, claimed);
      const reclaimed = await store.reclaimHung({ limit: 1000, maxRescues: 5 });
      expect(reclaimed.map((r) => r.id)).toEqual([claimed[1]!.id]);
      expect((await store.get(claimed[0]!.id))!.status).toBe('SUCCESS');
    });

    it('past the rescue limit a command becomes DEAD with a message that says why', async () => {
      const store = ctx.store();
      await drainExpired(store);
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type));
      for (let rescue = 1; rescue <= 2; rescue++) {
        const c = await claimOne(store, type, { leaseMs: 1, now: new Date(8.64e15) });
        await expire(store, [c]);
        const [r] = await store.reclaimHung({ limit: 1000, maxRescues: 1 });
        expect(r).toEqual({ id, type, status: rescue === 1 ? 'PENDING' : 'DEAD' });
      }
      const dead = await store.get(id);
      expect(dead).toMatchObject({
        status: 'DEAD',
        rescueCount: 2,
        lastError: rescueLimitMessage(1),
        claimToken: null,
      });
      expect(dead!.finishedAt).toBeInstanceOf(Date);
      expect(dead!.history.map((a) => [a.outcome, a.error])).toEqual([
        ['lease_expired', null],
        ['dead', rescueLimitMessage(1)],
      ]);
      expect(await claim(store, type, { now: new Date(8.64e15) })).toEqual([]);
      // A person's retry starts the rescue limit again, and keeps the count.
      expect(E.isRight(await store.retry(id, new Date()))).toBe(true);
      const c = await claimOne(store, type, { leaseMs: 1, now: new Date(8.64e15) });
      await expire(store, [c]);
      expect(await store.reclaimHung({ limit: 1000, maxRescues: 1 })).toEqual([
        { id, type, status: 'PENDING' },
      ]);
      expect(await store.get(id)).toMatchObject({ status: 'PENDING', rescueCount: 3, rescueCountAtRetry: 2 });
    });

    it('works in bounded batches', async () => {
      const store = ctx.store();
      await drainExpired(store);
      const type = uniqueType();
      const ids = await submit(
        store,
        Array.from({ length: 5 }, () => newCommand(type)),
      );
      const claimed = await claim(store, type, { leaseMs: 1 });
      await expire(store, claimed);
      const first = await store.reclaimHung({ limit: 2, maxRescues: 5 });
      expect(first).toHaveLength(2);
      const second = await store.reclaimHung({ limit: 2, maxRescues: 5 });
      expect(second).toHaveLength(2);
      const third = await store.reclaimHung({ limit: 2, maxRescues: 5 });
      expect(third).toHaveLength(1);
      expect(await store.reclaimHung({ limit: 2, maxRescues: 5 })).toEqual([]);
      expect(new Set([...first, ...second, ...third].map((r) => r.id))).toEqual(new Set(ids));
      expect(await store.reclaimHung({ limit: 0, maxRescues: 5 })).toEqual([]);
    });
  });
}
