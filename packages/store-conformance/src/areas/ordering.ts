import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import { decideFailure, immediateBackoff, LIMITS } from '@asynccmd/core';
import type { ClaimedCommand, CommandStore } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  claim,
  freshToken,
  later,
  newCommand,
  rejectionCode,
  submit,
  submitOne,
  uniqueType,
  useArea,
} from '../support.js';

const T0 = Date.UTC(2030, 0, 1);
const at = (ms: number): Date => new Date(T0 + ms);

const ids = (claimed: readonly ClaimedCommand[]): string[] => claimed.map((c) => c.id);

async function completeAll<Tx>(store: CommandStore<Tx>, claimed: readonly ClaimedCommand[]): Promise<void> {
  const refs = claimed.map((c) => ({ id: c.id, token: c.claimToken }));
  expect(await store.complete(refs)).toEqual(refs.map((r) => r.id));
}

/**
 * Ordering keys: the commands of one key run one at a time, in id (submission) order, and a DEAD
 * one holds the key until a person retries, cancels or kills it; different keys, and commands
 * without a key, are not held back.
 */
export function orderingArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('ordering keys', () => {
    const ctx = useArea(factory, adapter, 'ord');

    it('claims only the first unfinished command of each key; different keys and unkeyed ones in parallel', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const [a1, b1, a2, free, b2, a3] = await submit(store, [
        newCommand(type, { orderingKey: 'a' }),
        newCommand(type, { orderingKey: 'b' }),
        newCommand(type, { orderingKey: 'a' }),
        newCommand(type),
        newCommand(type, { orderingKey: 'b' }),
        newCommand(type, { orderingKey: 'a' }),
      ]);
      const first = await claim(store, type, { limit: 10 });
      expect(ids(first).sort()).toEqual([a1, b1, free].sort());
      // While a1 and b1 run, nothing more of their keys.
      expect(await claim(store, type, { limit: 10 })).toEqual([]);
      await completeAll(
        store,
        first.filter((c) => c.id === a1),
      );
      expect(ids(await claim(store, type, { limit: 10 }))).toEqual([a2]);
      await completeAll(
        store,
        first.filter((c) => c.id === b1),
      );
      const next = await claim(store, type, { limit: 10 });
      expect(ids(next)).toEqual([b2]);
      expect(await claim(store, type, { limit: 10 })).toEqual([]);
      expect((await store.get(a3!))?.status).toBe('PENDING');
    });

    it('keeps submission order within a key over priority and due time', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const [first, urgent, early] = await submit(store, [
        newCommand(type, { orderingKey: 'k', runAt: at(50), priority: 5 }),
        newCommand(type, { orderingKey: 'k', runAt: at(40), priority: -5 }),
        newCommand(type, { orderingKey: 'k', runAt: at(0), priority: 0 }),
      ]);
      // The first is not due yet: it still holds the key.
      expect(await claim(store, type, { now: at(45) })).toEqual([]);
      const order: string[] = [];
      for (let round = 0; round < 3; round++) {
        const claimed = await claim(store, type, { now: at(100) });
        expect(claimed).toHaveLength(1);
        order.push(...ids(claimed));
        await completeAll(store, claimed);
      }
      expect(order).toEqual([first, urgent, early]);
    });

    it('a DEAD command holds its key until retried (then it runs first) or cancelled', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const [capture, refund] = await submit(store, [
        newCommand(type, { orderingKey: 'order-1', maxRetry: 0 }),
        newCommand(type, { orderingKey: 'order-1' }),
      ]);
      const [c] = await claim(store, type);
      expect(c?.id).toBe(capture);
      const outcome = decideFailure(c!, new Error('gateway down'), new Date(), immediateBackoff);
      expect(await store.fail([{ ref: { id: c!.id, token: c!.claimToken }, outcome }])).toEqual([capture]);
      expect((await store.get(capture!))?.status).toBe('DEAD');
      expect(await claim(store, type)).toEqual([]);
      expect(
        await store.claimById({ id: refund!, now: later(), token: freshToken(), leaseMs: 60_000 }),
      ).toBeNull();
      // Retried, it runs before the refund.
      expect(E.isRight(await store.retry(capture!, new Date()))).toBe(true);
      const [again] = await claim(store, type);
      expect(again?.id).toBe(capture);
      const dead = decideFailure(again!, new Error('still down'), new Date(), immediateBackoff);
      expect(await store.fail([{ ref: { id: again!.id, token: again!.claimToken }, outcome: dead }])).toEqual(
        [capture],
      );
      // Given up on by a person: the key moves on.
      expect(E.isRight(await store.kill(capture!, 'written off'))).toBe(true);
      expect(ids(await claim(store, type))).toEqual([refund]);
    });

    it('claimById takes a keyed command only when it is first of its key', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const [one, two] = await submit(store, [
        newCommand(type, { orderingKey: 'byid' }),
        newCommand(type, { orderingKey: 'byid' }),
      ]);
      const byId = (id: string) =>
        store.claimById({ id, now: later(), token: freshToken(), leaseMs: 60_000 });
      expect(await byId(two!)).toBeNull();
      const first = await byId(one!);
      expect(first?.id).toBe(one);
      expect(await byId(two!)).toBeNull();
      await completeAll(store, [first!]);
      expect((await byId(two!))?.id).toBe(two);
    });

    it('keeps the key with the command: batch, single and idempotent submits, reads and claims', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const single = await submitOne(store, newCommand(type, { orderingKey: 'keep' }));
      const once = await store.transaction((tx) =>
        store.insertIdempotent(tx, { ...newCommand(type, { orderingKey: 'keep' }), bizKey: 'keep-once' }),
      );
      const unkeyed = await submitOne(store, newCommand(type));
      expect((await store.get(single))?.orderingKey).toBe('keep');
      expect((await store.get(once.id))?.orderingKey).toBe('keep');
      expect((await store.get(unkeyed))?.orderingKey).toBeNull();
      const claimed = await claim(store, type);
      expect(claimed.map((c) => [c.id, c.orderingKey])).toEqual([
        [single, 'keep'],
        [unkeyed, null],
      ]);
    });

    it('refuses an ordering key that is empty, too long or not text, writing nothing of the batch', async () => {
      const store = ctx.store();
      const type = uniqueType();
      for (const orderingKey of ['', 'k'.repeat(LIMITS.orderingKeyChars + 1), 42, 'k\u0000']) {
        const code = await rejectionCode(
          submit(store, [newCommand(type), newCommand(type, { orderingKey: orderingKey as string })]),
        );
        expect(code, String(orderingKey)).toBe('INVALID_ARGUMENT');
      }
      expect((await store.list({ type })).items).toEqual([]);
      const longest = 'k'.repeat(LIMITS.orderingKeyChars - 1) + 'é';
      const id = await submitOne(store, newCommand(type, { orderingKey: longest }));
      expect((await store.get(id))?.orderingKey).toBe(longest);
    });
  });
}
