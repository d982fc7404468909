import { describe, expect, it } from 'vitest';
import type { CommandStore, InsertResult, KeyWindow, OnPending, SqlExecutor } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import { later, newCommand, rejectionCode, uniqueType, useArea } from '../support.js';

/*
 * Debounce and throttle on submit (runtime `submitWindows`) are the replacing idempotent insert
 * with a due time at the window's end: 'replace' for debounce, 'keep' for a dropping throttle,
 * 'replace-keep-run-at' for a merging one. These are the races the runtime counts on.
 */

/** `count` submits of one key, alternately on `store` and `peer`, each in its own transaction. */
async function race<Tx>(
  stores: readonly [CommandStore<Tx>, CommandStore<Tx>],
  type: string,
  onPending: OnPending,
  count: number,
): Promise<{ results: InsertResult[]; writeOrder: number[]; runAts: Date[] }> {
  const writeOrder: number[] = [];
  const runAts = Array.from({ length: count }, (_, n) => later(60_000 + n * 1_000));
  const results = await Promise.all(
    runAts.map((runAt, n) => {
      const store = stores[n % 2] as CommandStore<Tx>;
      return store.transaction(async (tx) => {
        const r = await store.insertIdempotent(
          tx,
          { ...newCommand(type, { payloadJson: `{"n":${n}}`, runAt }), bizKey: 'window' },
          onPending === 'keep' ? undefined : { onPending },
        );
        // A write holds the key's row (or the database) until COMMIT: the order writes returned
        // in is the order they were applied in.
        if (!r.duplicate || r.replaced) writeOrder.push(n);
        return r;
      });
    }),
  );
  return { results, writeOrder, runAts };
}

export function submitWindowsArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('submit windows (debounce and throttle)', () => {
    const ctx = useArea(factory, adapter, 'swn');

    it('debounce: 20 concurrent submits leave exactly one command, with the last payload and its due time', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType();
        const { results, writeOrder, runAts } = await race([store, peer], type, 'replace', 20);
        expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
        expect(results.every((r) => !r.duplicate || r.replaced)).toBe(true);
        expect(new Set(results.map((r) => r.id)).size).toBe(1);
        expect(writeOrder).toHaveLength(20);
        const rows = (await store.list({ type })).items;
        expect(rows).toHaveLength(1);
        const last = writeOrder.at(-1) as number;
        expect(rows[0]?.payload).toEqual({ n: last });
        expect(rows[0]?.nextRunAt.getTime()).toBe(runAts[last]?.getTime());
      } finally {
        await peer.close();
      }
    });

    it('throttle (drop): 20 concurrent submits leave the first one, its payload and due time untouched', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType();
        const { results, writeOrder, runAts } = await race([store, peer], type, 'keep', 20);
        expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
        expect(results.filter((r) => r.replaced)).toEqual([]);
        expect(writeOrder).toHaveLength(1);
        const rows = (await store.list({ type })).items;
        expect(rows).toHaveLength(1);
        const first = writeOrder[0] as number;
        expect(rows[0]?.payload).toEqual({ n: first });
        expect(rows[0]?.nextRunAt.getTime()).toBe(runAts[first]?.getTime());
      } finally {
        await peer.close();
      }
    });

    it('throttle (merge): 20 concurrent submits leave one command, the last payload, the first due time', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType();
        const { results, writeOrder, runAts } = await race([store, peer], type, 'replace-keep-run-at', 20);
        expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
        expect(writeOrder).toHaveLength(20);
        const rows = (await store.list({ type })).items;
        expect(rows).toHaveLength(1);
        expect(rows[0]?.payload).toEqual({ n: writeOrder.at(-1) });
        expect(rows[0]?.nextRunAt.getTime()).toBe(runAts[writeOrder[0] as number]?.getTime());
      } finally {
        await peer.close();
      }
    });
  });

  describe('key windows of leading-edge throttles (submitWindows store)', () => {
    const ctx = useArea(factory, adapter, 'swk');
    const at = (iso: string): Date => new Date(iso);
    const readWindow = <Tx>(store: CommandStore<Tx>, type: string, key: string): Promise<KeyWindow | null> =>
      store.transaction((tx) => store.submitWindows.hold(tx, type, key));

    it('a key without a row has no window; a window set is read back by the next transaction', async () => {
      const store = ctx.store();
      const type = uniqueType();
      expect(await readWindow(store, type, 'k')).toBeNull();
      // The first hold left an empty row: still no window.
      expect(await readWindow(store, type, 'k')).toBeNull();
      const window = { opensAt: at('2031-05-06T07:08:09.123Z'), holder: '42' };
      await store.transaction(async (tx) => {
        expect(await store.submitWindows.hold(tx, type, 'k')).toBeNull();
        await store.submitWindows.set(tx, type, 'k', window);
      });
      expect(await readWindow(store, type, 'k')).toEqual(window);
      // Keys and types are apart.
      expect(await readWindow(store, type, 'K2')).toBeNull();
      expect(await readWindow(store, uniqueType(), 'k')).toBeNull();
    });

    it('a rolled-back set leaves the window as it was', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const first = { opensAt: at('2031-01-01T00:00:00.000Z'), holder: '7' };
      await store.transaction(async (tx) => {
        await store.submitWindows.hold(tx, type, 'k');
        await store.submitWindows.set(tx, type, 'k', first);
      });
      await expect(
        store.transaction(async (tx) => {
          await store.submitWindows.hold(tx, type, 'k');
          await store.submitWindows.set(tx, type, 'k', {
            opensAt: at('2032-01-01T00:00:00.000Z'),
            holder: '8',
          });
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect(await readWindow(store, type, 'k')).toEqual(first);
    });

    it('20 concurrent holds of one key on two stores take turns: each sees the window the one before set', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType();
        const base = at('2031-01-01T00:00:00.000Z').getTime();
        const seen = await Promise.all(
          Array.from({ length: 20 }, (_, n) => {
            const s = (n % 2 === 0 ? store : peer) as CommandStore<unknown>;
            return s.transaction(async (tx) => {
              const held = await s.submitWindows.hold(tx, type, 'hot');
              const next = (held?.opensAt.getTime() ?? base) + 1_000;
              await s.submitWindows.set(tx, type, 'hot', { opensAt: new Date(next), holder: String(n + 1) });
              return held?.opensAt.getTime() ?? null;
            });
          }),
        );
        // No lost update: every hold saw a different window, and the last is 20 seconds on.
        expect(new Set(seen).size).toBe(20);
        expect((await readWindow(store, type, 'hot'))?.opensAt.getTime()).toBe(base + 20_000);
      } finally {
        await peer.close();
      }
    });

    it('hold and set through an SqlExecutor, in the transaction it wraps', async () => {
      const harness = ctx.harness();
      const wrap = harness.sqlExecutor;
      if (wrap === undefined) return expect(harness.store.capabilities.sqlExecutor).toBe(false);
      const store = ctx.store();
      const type = uniqueType();
      const window = { opensAt: at('2031-02-03T04:05:06.789Z'), holder: '12345678901234' };
      await store.transaction(async (tx) => {
        const executor: SqlExecutor = wrap(tx);
        expect(await store.submitWindows.hold(executor, type, 'x')).toBeNull();
        await store.submitWindows.set(executor, type, 'x', window);
      });
      expect(await readWindow(store, type, 'x')).toEqual(window);
    });

    it('prune deletes the windows opened before the cutoff and empty rows, oldest first, in bounded batches', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const keys = ['a', 'b', 'c', 'd'];
      await store.transaction(async (tx) => {
        for (const [i, key] of keys.entries()) {
          await store.submitWindows.hold(tx, type, key);
          // a, b, c open in 2001 (a first); d in 2100.
          const opensAt = i < 3 ? at(`2001-01-0${i + 1}T00:00:00.000Z`) : at('2100-01-01T00:00:00.000Z');
          await store.submitWindows.set(tx, type, key, { opensAt, holder: String(i + 1) });
        }
        await store.submitWindows.hold(tx, type, 'empty');
      });
      const cutoff = at('2002-01-01T00:00:00.000Z');
      // Rows of other tests (this decade's windows) are later than the cutoff; empty ones may be
      // theirs too, so count this test's rows only.
      let pruned = 0;
      for (;;) {
        const n = await store.submitWindows.prune(cutoff, 1);
        expect(n).toBeLessThanOrEqual(1);
        if (n === 0) break;
        pruned += n;
      }
      expect(pruned).toBeGreaterThanOrEqual(4);
      expect(await readWindow(store, type, 'd')).toEqual({
        opensAt: at('2100-01-01T00:00:00.000Z'),
        holder: '4',
      });
      // The hold above inserted empty rows again for these: none had a window left.
      for (const key of ['a', 'b', 'c', 'empty']) expect(await readWindow(store, type, key)).toBeNull();
      expect(await store.submitWindows.prune(cutoff, 0)).toBe(0);
    });

    it('refuses bad input with INVALID_ARGUMENT before writing anything', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const good = { opensAt: at('2031-01-01T00:00:00.000Z'), holder: '1' };
      const bad: [string, (tx: unknown) => Promise<unknown>][] = [
        ['empty type', (tx) => store.submitWindows.hold(tx as never, '', 'k')],
        ['empty key', (tx) => store.submitWindows.hold(tx as never, type, '')],
        ['long key', (tx) => store.submitWindows.hold(tx as never, type, 'k'.repeat(256))],
        ['NUL in key', (tx) => store.submitWindows.hold(tx as never, type, 'a\u0000b')],
        ['not a key', (tx) => store.submitWindows.hold(tx as never, type, 7 as never)],
        [
          'bad date',
          (tx) => store.submitWindows.set(tx as never, type, 'k', { ...good, opensAt: new Date(NaN) }),
        ],
        ['no transaction', () => store.submitWindows.hold({} as never, type, 'k')],
      ];
      for (const [what, call] of bad) {
        const code = await store.transaction(async (tx) => rejectionCode(call(tx)));
        expect(code, what).toBe('INVALID_ARGUMENT');
      }
      const badHolder = store.transaction(async (tx) =>
        rejectionCode(store.submitWindows.set(tx, type, 'k', { ...good, holder: 'x' })),
      );
      expect(await badHolder).toBe('INVALID_ID');
      await expect(store.submitWindows.prune(new Date(NaN), 1)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
      await expect(store.submitWindows.prune(new Date(), -1)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
      // Nothing of the type was written: its keys have no rows (a hold finds none to lock).
      expect(await readWindow(store, type, 'k')).toBeNull();
    });
  });
}
