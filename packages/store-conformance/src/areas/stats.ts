import { describe, expect, it } from 'vitest';
import type { StoreHarnessFactory } from '../harness.js';
import { newCommand, submit, uniqueType, useArea } from '../support.js';
import { commandIn } from './admin.js';

export function statsArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('stats', () => {
    const ctx = useArea(factory, adapter, 'sta');

    it('an empty store has no counts and nothing waiting', async () => {
      const store = ctx.store();
      expect(await store.stats(new Date())).toEqual({ counts: [], oldestDueAt: null });
    });

    it('counts by status and type, and reports the oldest due PENDING command at `now`', async () => {
      const store = ctx.store();
      const [a, b] = [uniqueType('a'), uniqueType('b')];
      const t = (ms: number) => new Date(Date.UTC(2030, 0, 1) + ms);
      await submit(store, [
        newCommand(a, { runAt: t(500) }),
        newCommand(a, { runAt: t(100) }),
        newCommand(b, { runAt: t(300) }),
        newCommand(b, { runAt: t(5_000) }),
      ]);
      await commandIn(store, 'DEAD', b);
      await commandIn(store, 'SUCCESS', a);
      const { counts, oldestDueAt } = await store.stats(t(1_000));
      const sorted = [...counts].sort((x, y) => `${x.status}${x.type}`.localeCompare(`${y.status}${y.type}`));
      expect(sorted).toEqual(
        [
          { status: 'DEAD', type: b, count: 1 },
          { status: 'PENDING', type: a, count: 2 },
          { status: 'PENDING', type: b, count: 2 },
          { status: 'SUCCESS', type: a, count: 1 },
        ].sort((x, y) => `${x.status}${x.type}`.localeCompare(`${y.status}${y.type}`)),
      );
      expect(oldestDueAt?.getTime()).toBe(t(100).getTime());
      expect((await store.stats(t(99))).oldestDueAt).toBeNull();
    });
  });
}
