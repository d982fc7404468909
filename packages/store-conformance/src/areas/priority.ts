import { describe, expect, it } from 'vitest';
import { DEFAULT_PRIORITY, PRIORITY_RANGE } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import { claim, newCommand, rejectionCode, submit, submitOne, uniqueType, useArea } from '../support.js';

const T0 = Date.UTC(2030, 0, 1);
const at = (ms: number): Date => new Date(T0 + ms);

/** Commands submitted per batch when filling a backlog (every adapter's batch insert takes this many). */
const BACKLOG_BATCH = 1000;

/**
 * Priorities: a claim takes the most urgent priority (the lowest number) first, then the oldest
 * due, then the smallest id; the priority is kept with the command and shown in its record.
 */
export function priorityArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('priority', () => {
    const ctx = useArea(factory, adapter, 'pri');

    it('claims by priority (lowest first), then nextRunAt, then id', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const ids = await submit(store, [
        newCommand(type, { runAt: at(10), priority: 5 }),
        newCommand(type, { runAt: at(20), priority: 0 }),
        newCommand(type, { runAt: at(5), priority: 5 }),
        newCommand(type, { runAt: at(30), priority: -3 }),
        newCommand(type, { runAt: at(20), priority: 0 }),
        newCommand(type, { runAt: at(1) }),
        newCommand(type, { runAt: at(1), priority: PRIORITY_RANGE.max }),
        newCommand(type, { runAt: at(40), priority: PRIORITY_RANGE.min }),
      ]);
      const [p5late, p0a, p5early, neg, p0b, dflt, last, first] = ids;
      const claimed = await claim(store, type, { now: at(100), limit: 5 });
      expect(claimed.map((c) => c.id)).toEqual([first, neg, dflt, p0a, p0b]);
      expect(claimed.map((c) => c.priority)).toEqual([PRIORITY_RANGE.min, -3, 0, 0, 0]);
      const rest = await claim(store, type, { now: at(100), limit: 5 });
      expect(rest.map((c) => c.id)).toEqual([p5early, p5late, last]);
    });

    it('a command not yet due waits, whatever its priority', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const [urgentLater, routineNow] = await submit(store, [
        newCommand(type, { runAt: at(50), priority: -10 }),
        newCommand(type, { runAt: at(0), priority: 10 }),
      ]);
      expect((await claim(store, type, { now: at(10) })).map((c) => c.id)).toEqual([routineNow]);
      expect((await claim(store, type, { now: at(50) })).map((c) => c.id)).toEqual([urgentLater]);
    });

    it('a priority-0 command submitted behind 10,000 priority-5 ones is in the very next claim', async () => {
      const store = ctx.store();
      const type = uniqueType();
      for (let i = 0; i < 10_000; i += BACKLOG_BATCH) {
        await submit(
          store,
          Array.from({ length: BACKLOG_BATCH }, () => newCommand(type, { runAt: at(0), priority: 5 })),
        );
      }
      const urgent = await submitOne(store, newCommand(type, { runAt: at(1), priority: 0 }));
      const [next, ...others] = await claim(store, type, { now: at(10), limit: 10 });
      expect(next?.id).toBe(urgent);
      expect(others.map((c) => c.priority)).toEqual(Array.from({ length: 9 }, () => 5));
    }, 120_000);

    it('keeps the priority with the command: default, batch, idempotent submit, reads and claims', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const [dflt, urgent] = await submit(store, [newCommand(type), newCommand(type, { priority: -7 })]);
      const once = await store.transaction((tx) =>
        store.insertIdempotent(tx, { ...newCommand(type, { priority: 3 }), bizKey: 'k' }),
      );
      expect((await store.get(dflt!))?.priority).toBe(DEFAULT_PRIORITY);
      expect((await store.get(urgent!))?.priority).toBe(-7);
      expect((await store.get(once.id))?.priority).toBe(3);
      const listed = (await store.list({ type })).items;
      expect(new Map(listed.map((r) => [r.id, r.priority]))).toEqual(
        new Map([
          [dflt!, 0],
          [urgent!, -7],
          [once.id, 3],
        ]),
      );
      const claimed = await claim(store, type);
      expect(claimed.map((c) => [c.id, c.priority])).toEqual([
        [urgent!, -7],
        [dflt!, 0],
        [once.id, 3],
      ]);
    });

    it('refuses a priority that is not an integer in range, writing nothing of the batch', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const bad: unknown[] = [PRIORITY_RANGE.max + 1, PRIORITY_RANGE.min - 1, 1.5, '1', NaN];
      for (const priority of bad) {
        const code = await rejectionCode(
          submit(store, [newCommand(type), newCommand(type, { priority: priority as number })]),
        );
        expect(code, String(priority)).toBe('INVALID_ARGUMENT');
        const once = store.transaction((tx) =>
          store.insertIdempotent(tx, { ...newCommand(type, { priority: priority as number }), bizKey: 'k' }),
        );
        expect(await rejectionCode(once), String(priority)).toBe('INVALID_ARGUMENT');
      }
      expect((await store.list({ type })).items).toEqual([]);
    });
  });
}
