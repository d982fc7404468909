import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import type { StoreHarnessFactory } from '../harness.js';
import { newCommand, rejectionCode, submit, uniqueType, useArea } from '../support.js';
import { commandIn } from './admin.js';

/**
 * The health probe answers for the whole table, so this area's namespace holds only the rows its
 * tests make, and each test leaves no dead letter or due command behind.
 */
export function healthArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('health probe', () => {
    const ctx = useArea(factory, adapter, 'hea');

    it('an empty store has no dead letter and nothing waiting', async () => {
      const store = ctx.store();
      expect(await store.healthProbe({ now: new Date(), deadLetterLimit: 10 })).toEqual({
        deadLetters: 0,
        oldestDueAt: null,
      });
    });

    it('counts dead letters up to the limit, and nothing else as one', async () => {
      const store = ctx.store();
      const type = uniqueType('dead');
      const dead = [
        await commandIn(store, 'DEAD', type),
        await commandIn(store, 'DEAD', type),
        await commandIn(store, 'DEAD', uniqueType('dead')),
      ];
      for (const status of ['RUNNING', 'SUCCESS', 'CANCELLED'] as const) await commandIn(store, status);
      const now = new Date(Date.now() + 3_600_000);
      expect((await store.healthProbe({ now, deadLetterLimit: 10 })).deadLetters).toBe(3);
      expect((await store.healthProbe({ now, deadLetterLimit: 3 })).deadLetters).toBe(3);
      expect((await store.healthProbe({ now, deadLetterLimit: 2 })).deadLetters).toBe(2);
      expect((await store.healthProbe({ now, deadLetterLimit: 1 })).deadLetters).toBe(1);
      for (const d of dead) expect(E.isRight(await store.kill(d.id, 'handled'))).toBe(true);
      expect((await store.healthProbe({ now, deadLetterLimit: 10 })).deadLetters).toBe(0);
    });

    it('reports the nextRunAt of the oldest PENDING command due at `now`', async () => {
      const store = ctx.store();
      const t = (ms: number) => new Date(Date.UTC(2031, 0, 1) + ms);
      const type = uniqueType('due');
      const ids = await submit(store, [
        newCommand(type, { runAt: t(500) }),
        newCommand(type, { runAt: t(100) }),
        newCommand(type, { runAt: t(5_000) }),
      ]);
      const probe = (now: Date) => store.healthProbe({ now, deadLetterLimit: 1 });
      expect((await probe(t(1_000))).oldestDueAt?.getTime()).toBe(t(100).getTime());
      expect((await probe(t(100))).oldestDueAt?.getTime()).toBe(t(100).getTime());
      expect((await probe(t(99))).oldestDueAt).toBeNull();
      // A RUNNING command is not waiting, however overdue it was.
      expect(
        await store.claimById({ id: ids[1]!, now: t(1_000), token: 'hp', leaseMs: 60_000 }),
      ).not.toBeNull();
      expect((await probe(t(1_000))).oldestDueAt?.getTime()).toBe(t(500).getTime());
      for (const id of ids) await store.kill(id, 'done with it');
      expect(await probe(t(10_000))).toEqual({ deadLetters: 0, oldestDueAt: null });
    });

    it('refuses a limit or time that is not one with INVALID_ARGUMENT', async () => {
      const store = ctx.store();
      for (const deadLetterLimit of [0, -1, 1.5, Number.NaN, 100_001]) {
        expect(
          await rejectionCode(store.healthProbe({ now: new Date(), deadLetterLimit })),
          String(deadLetterLimit),
        ).toBe('INVALID_ARGUMENT');
      }
      expect(await rejectionCode(store.healthProbe({ now: new Date('nope'), deadLetterLimit: 1 }))).toBe(
        'INVALID_ARGUMENT',
      );
    });
  });
}
