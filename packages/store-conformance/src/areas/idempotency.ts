import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import type { CommandStore, InsertResult, NewCommand } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import { claimOne, newCommand, rejectionCode, submit, uniqueType, useArea } from '../support.js';

function submitIdempotent<Tx>(
  store: CommandStore<Tx>,
  command: NewCommand & { bizKey: string },
): Promise<InsertResult> {
  return store.transaction((tx) => store.insertIdempotent(tx, command));
}

function failAsDead<Tx>(store: CommandStore<Tx>, id: string, token: string): Promise<string[]> {
  return store.fail([
    {
      ref: { id, token },
      outcome: { status: 'DEAD', retryCount: 1, nextRunAt: new Date(), lastError: 'boom' },
    },
  ]);
}

export function idempotencyArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('idempotent submit', () => {
    const ctx = useArea(factory, adapter, 'idm');

    it('a second submit of an unfinished (type, bizKey) returns the first id as a duplicate', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const first = await submitIdempotent(store, { ...newCommand(type), bizKey: 'order-1' });
      expect(first.duplicate).toBe(false);
      expect((await store.get(first.id))?.idempotent).toBe(true);
      const second = await submitIdempotent(store, {
        ...newCommand(type, { payloadJson: '{"v":2}' }),
        bizKey: 'order-1',
      });
      expect(second).toEqual({ id: first.id, duplicate: true, replaced: false });
      // Still held while it runs.
      await claimOne(store, type);
      expect(await submitIdempotent(store, { ...newCommand(type), bizKey: 'order-1' })).toEqual({
        id: first.id,
        duplicate: true,
        replaced: false,
      });
      // The same key under another type is another key.
      expect(
        (await submitIdempotent(store, { ...newCommand(uniqueType()), bizKey: 'order-1' })).duplicate,
      ).toBe(false);
      expect((await store.list({ type, bizKey: 'order-1' })).items).toHaveLength(1);
    });

    it('plain submits carrying the same bizKey are never blocked and never block', async () => {
      const store = ctx.store();
      const type = uniqueType();
      await submit(store, [newCommand(type, { bizKey: 'k' }), newCommand(type, { bizKey: 'k' })]);
      const held = await submitIdempotent(store, { ...newCommand(type), bizKey: 'k' });
      expect(held.duplicate).toBe(false);
      await submit(store, [newCommand(type, { bizKey: 'k' })]);
      expect((await store.list({ type, bizKey: 'k' })).items).toHaveLength(4);
      expect((await submitIdempotent(store, { ...newCommand(type), bizKey: 'k' })).id).toBe(held.id);
    });

    it.each([['SUCCESS'], ['DEAD'], ['CANCELLED']] as const)(
      'once the holder is %s the same key may be submitted again',
      async (end) => {
        const store = ctx.store();
        const type = uniqueType();
        const first = await submitIdempotent(store, {
          ...newCommand(type, { maxRetry: 0 }),
          bizKey: 'again',
        });
        const c = await claimOne(store, type);
        if (end === 'SUCCESS') await store.complete([{ id: first.id, token: c.claimToken }]);
        if (end === 'DEAD') {
          expect(await failAsDead(store, first.id, c.claimToken)).toEqual([first.id]);
        }
        if (end === 'CANCELLED') expect(E.isRight(await store.kill(first.id))).toBe(true);
        expect((await store.get(first.id))?.status).toBe(end);
        const next = await submitIdempotent(store, { ...newCommand(type), bizKey: 'again' });
        expect(next.duplicate).toBe(false);
        expect(next.id).not.toBe(first.id);
      },
    );

    it('a rolled-back idempotent submit does not hold the key', async () => {
      const store = ctx.store();
      const type = uniqueType();
      await expect(
        store.transaction(async (tx) => {
          await store.insertIdempotent(tx, { ...newCommand(type), bizKey: 'rb' });
          throw new Error('rollback');
        }),
      ).rejects.toThrow('rollback');
      expect((await submitIdempotent(store, { ...newCommand(type), bizKey: 'rb' })).duplicate).toBe(false);
    });

    it('under concurrency from two connections exactly one command is inserted', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType();
        const plain = Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            submit(i % 2 ? peer : store, [newCommand(type, { bizKey: 'race' })]),
          ),
        );
        const results = await Promise.all(
          Array.from({ length: 24 }, (_, i) =>
            submitIdempotent(i % 2 ? peer : store, { ...newCommand(type), bizKey: 'race' }),
          ),
        );
        const plainIds = (await plain).flat();
        expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
        expect(new Set(results.map((r) => r.id)).size).toBe(1);
        const rows = (await store.list({ type, bizKey: 'race' })).items;
        expect(rows.filter((r) => r.idempotent).map((r) => r.id)).toEqual([results[0]!.id]);
        expect(
          rows
            .filter((r) => !r.idempotent)
            .map((r) => r.id)
            .sort(),
        ).toEqual([...plainIds].sort());
        expect(plainIds).toHaveLength(8);
      } finally {
        await peer.close();
      }
    });

    it('admin retry of a dead command whose key is held again is an IDEMPOTENCY_CONFLICT Left', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const dead = await submitIdempotent(store, { ...newCommand(type, { maxRetry: 0 }), bizKey: 'held' });
      const c = await claimOne(store, type);
      expect(await failAsDead(store, dead.id, c.claimToken)).toEqual([dead.id]);
      const holder = await submitIdempotent(store, { ...newCommand(type), bizKey: 'held' });
      expect(holder.duplicate).toBe(false);
      const refused = await store.retry(dead.id, new Date());
      expect(E.isLeft(refused) && refused.left).toMatchObject({
        code: 'IDEMPOTENCY_CONFLICT',
        commandId: dead.id,
        holderId: holder.id,
      });
      expect((await store.get(dead.id))?.status).toBe('DEAD');
      // Once the holder is gone, the retry goes through and takes the key.
      expect(E.isRight(await store.cancel(holder.id))).toBe(true);
      expect(E.isRight(await store.retry(dead.id, new Date()))).toBe(true);
      expect(await submitIdempotent(store, { ...newCommand(type), bizKey: 'held' })).toEqual({
        id: dead.id,
        duplicate: true,
        replaced: false,
      });
    });

    it('an idempotent submit needs a bizKey', async () => {
      const store = ctx.store();
      const type = uniqueType();
      expect(await rejectionCode(submitIdempotent(store, { ...newCommand(type), bizKey: '' }))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(
        await rejectionCode(
          submitIdempotent(store, { ...newCommand(type), bizKey: null as unknown as string }),
        ),
      ).toBe('INVALID_ARGUMENT');
      expect((await store.list({ type })).items).toEqual([]);
    });
  });
}
