import { describe, expect, it } from 'vitest';
import type { CommandStore, InsertResult, OnPending } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import { later, newCommand, uniqueType, useArea } from '../support.js';

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
}
