import { describe, expect, it } from 'vitest';
import type { StoreHarnessFactory } from '../harness.js';
import { rejectionCode, uniqueType, useArea } from '../support.js';
import { commandIn } from './admin.js';

export function purgeArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('purge', () => {
    const ctx = useArea(factory, adapter, 'prg');

    it('deletes finished SUCCESS and CANCELLED commands older than the cutoff, never DEAD unless asked', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const made: Record<string, string> = {};
      for (const s of ['PENDING', 'RUNNING', 'SUCCESS', 'DEAD', 'CANCELLED'] as const) {
        made[s] = (await commandIn(store, s, type)).id;
      }
      const finishedBefore = new Date((await store.now()).getTime() - 60_000);
      // Nothing finished before a cutoff in the past.
      expect(await store.purge({ olderThan: finishedBefore, limit: 100 })).toBe(0);
      const cutoff = new Date((await store.now()).getTime() + 60_000);
      expect(await store.purge({ olderThan: cutoff, limit: 100 })).toBe(2);
      const left = (await store.list({ type })).items.map((c) => c.status).sort();
      expect(left).toEqual(['DEAD', 'PENDING', 'RUNNING']);
      expect(await store.get(made.SUCCESS!)).toBeNull();
      expect(await store.get(made.CANCELLED!)).toBeNull();
      expect(await store.purge({ olderThan: cutoff, limit: 100, statuses: ['DEAD'] })).toBe(1);
      expect((await store.list({ type })).items.map((c) => c.status).sort()).toEqual(['PENDING', 'RUNNING']);
    });

    it('deletes row by row in bounded batches', async () => {
      // CANCELLED commands stay in the command table on every store, so every answer here is a
      // row-by-row batch: never more than the limit.
      const store = ctx.store();
      const type = uniqueType();
      for (let i = 0; i < 5; i++) await commandIn(store, 'CANCELLED', type);
      const cutoff = new Date((await store.now()).getTime() + 60_000);
      expect(await store.purge({ olderThan: cutoff, limit: 2, statuses: ['CANCELLED'] })).toBe(2);
      expect(await store.purge({ olderThan: cutoff, limit: 2, statuses: ['CANCELLED'] })).toBe(2);
      expect(await store.purge({ olderThan: cutoff, limit: 2, statuses: ['CANCELLED'] })).toBe(1);
      expect(await store.purge({ olderThan: cutoff, limit: 2, statuses: ['CANCELLED'] })).toBe(0);
      expect((await store.list({ type })).items).toEqual([]);
    });

    it('called until it answers less than the limit, deletes every SUCCESS before the cutoff and counts each once', async () => {
      // A store that keeps SUCCESS in time partitions may drop a whole partition in one call and
      // count all its rows: an answer above the limit is allowed there, a lost or doubled count not.
      const store = ctx.store();
      const type = uniqueType();
      for (let i = 0; i < 5; i++) await commandIn(store, 'SUCCESS', type);
      const cutoff = new Date((await store.now()).getTime() + 60_000);
      const answers: number[] = [];
      for (let call = 0; call < 10; call++) {
        answers.push(await store.purge({ olderThan: cutoff, limit: 2, statuses: ['SUCCESS'] }));
        if (answers.at(-1)! < 2) break;
      }
      expect(answers.at(-1)).toBeLessThan(2);
      expect(answers.reduce((a, b) => a + b, 0)).toBe(5);
      expect((await store.list({ type })).items).toEqual([]);
    });

    it('a purge that deletes nothing leaves every command readable as it was, wherever it keeps finished ones', async () => {
      // A store may move finished commands elsewhere (a history table) when it purges: every read
      // must see them exactly as before, and a retried outcome must still find its own SUCCESS.
      const store = ctx.store();
      const type = uniqueType();
      const ids: string[] = [];
      for (const s of ['SUCCESS', 'DEAD', 'CANCELLED', 'PENDING'] as const) {
        ids.push((await commandIn(store, s, type)).id);
      }
      const [id] = await store.transaction((tx) =>
        store.insert(tx, [{ type, payloadJson: '{}', maxRetry: 0 }]),
      );
      const claimed = await store.claimById({
        id: id!,
        now: new Date(Date.now() + 1000),
        token: 'prg-token',
        leaseMs: 60_000,
      });
      expect(
        await store.complete([{ id: id!, token: claimed!.claimToken, resultJson: '{"kept":true}' }]),
      ).toEqual([id]);
      ids.push(id!);
      const now = await store.now();
      const counts = async () => (await store.stats(now)).counts.filter((r) => r.type === type);
      const before = {
        one: await store.get(id!),
        many: await store.getMany(ids),
        list: await store.list({ type }),
        successes: await store.list({ type, status: 'SUCCESS' }),
        counts: await counts(),
      };
      expect(await store.purge({ olderThan: new Date(now.getTime() - 3_600_000), limit: 100 })).toBe(0);
      expect(await store.get(id!)).toEqual(before.one);
      expect(before.one).toMatchObject({ status: 'SUCCESS', result: { kept: true } });
      expect(await store.getMany(ids)).toEqual(before.many);
      expect(await store.list({ type })).toEqual(before.list);
      expect(await store.list({ type, status: 'SUCCESS' })).toEqual(before.successes);
      expect(await counts()).toEqual(before.counts);
      // A complete tried again after its reply was lost reports its own SUCCESS, and only its own.
      expect(await store.complete([{ id: id!, token: claimed!.claimToken }])).toEqual([id]);
      expect(await store.complete([{ id: id!, token: 'another claim' }])).toEqual([]);
    });

    it('refuses to purge unfinished commands', async () => {
      const store = ctx.store();
      const type = uniqueType();
      await commandIn(store, 'PENDING', type);
      for (const statuses of [['PENDING'], ['RUNNING'], ['SUCCESS', 'NOPE']]) {
        expect(
          await rejectionCode(store.purge({ olderThan: new Date(8.64e15), limit: 10, statuses } as never)),
        ).toBe('INVALID_ARGUMENT');
      }
      expect((await store.list({ type })).items).toHaveLength(1);
    });
  });
}
