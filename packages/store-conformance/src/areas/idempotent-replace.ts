import { describe, expect, it } from 'vitest';
import type {
  CommandStore,
  IdempotentInsertOptions,
  InsertResult,
  NewCommand,
  OnPending,
} from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  claim,
  claimOne,
  later,
  newCommand,
  rejectionCode,
  submitOne,
  uniqueType,
  useArea,
} from '../support.js';

function submitOnce<Tx>(
  store: CommandStore<Tx>,
  command: NewCommand & { bizKey: string },
  onPending?: OnPending,
): Promise<InsertResult> {
  const options = onPending === undefined ? undefined : { onPending };
  return store.transaction((tx) => store.insertIdempotent(tx, command, options));
}

/** The first contents of a key's command, and the different ones a replacing submit brings. */
function firstAndNext(type: string, bizKey: string) {
  const firstRunAt = later(60_000);
  const nextRunAt = later(120_000);
  const first = {
    ...newCommand(type, { payloadJson: '{"v":1}', maxRetry: 1, priority: 5, runAt: firstRunAt }),
    headers: { h: 'one' },
    owner: 'first-owner',
    bizKey,
  };
  const next = {
    ...newCommand(type, { payloadJson: '{"v":2}', maxRetry: 7, priority: -3, runAt: nextRunAt }),
    headers: { h: 'two' },
    owner: 'next-owner',
    bizKey,
  };
  return { first, next, firstRunAt, nextRunAt };
}

export function idempotentReplaceArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('replacing idempotent submit (onPending)', () => {
    const ctx = useArea(factory, adapter, 'irp');

    it("'replace' gives a PENDING holder the submit's payload, headers, priority, maxRetry and due time", async () => {
      const store = ctx.store();
      const type = uniqueType();
      const { first, next, nextRunAt } = firstAndNext(type, 'debounced');
      const held = await submitOnce(store, first, 'replace');
      expect(held).toMatchObject({ duplicate: false, replaced: false });
      const before = await store.get(held.id);
      expect(await submitOnce(store, next, 'replace')).toEqual({
        id: held.id,
        duplicate: true,
        replaced: true,
      });
      const after = await store.get(held.id);
      expect(after).toMatchObject({
        status: 'PENDING',
        payload: { v: 2 },
        headers: { h: 'two' },
        priority: -3,
        maxRetry: 7,
        retryCount: 0,
        rescueCount: 0,
        idempotent: true,
        bizKey: 'debounced',
        // Who submitted it first stays on the row.
        owner: 'first-owner',
      });
      expect(after?.nextRunAt.getTime()).toBe(nextRunAt.getTime());
      expect(after?.createdAt.getTime()).toBe(before?.createdAt.getTime());
      expect((await store.list({ type })).items).toHaveLength(1);
    });

    it("'replace' without runAt makes the holder due now; each replace pushes it back again", async () => {
      const store = ctx.store();
      const type = uniqueType();
      const held = await submitOnce(store, { ...newCommand(type, { runAt: later(60_000) }), bizKey: 'now' });
      await submitOnce(
        store,
        { ...newCommand(type, { payloadJson: '{"v":"now"}' }), bizKey: 'now' },
        'replace',
      );
      const dueNow = await store.get(held.id);
      expect(dueNow!.nextRunAt.getTime()).toBeLessThanOrEqual((await store.now()).getTime());
      const pushed = later(90_000);
      await submitOnce(store, { ...newCommand(type, { runAt: pushed }), bizKey: 'now' }, 'replace');
      expect((await store.get(held.id))?.nextRunAt.getTime()).toBe(pushed.getTime());
    });

    it("'replace-keep-run-at' replaces all of it but the due time", async () => {
      const store = ctx.store();
      const type = uniqueType();
      const { first, next, firstRunAt } = firstAndNext(type, 'throttled');
      const held = await submitOnce(store, first);
      const result = await submitOnce(store, next, 'replace-keep-run-at');
      expect(result).toEqual({ id: held.id, duplicate: true, replaced: true });
      const after = await store.get(held.id);
      expect(after).toMatchObject({ payload: { v: 2 }, headers: { h: 'two' }, priority: -3, maxRetry: 7 });
      expect(after?.nextRunAt.getTime()).toBe(firstRunAt.getTime());
    });

    it("'keep', and no option at all, leave the PENDING holder as it is", async () => {
      const store = ctx.store();
      const type = uniqueType();
      const { first, next } = firstAndNext(type, 'kept');
      const held = await submitOnce(store, first);
      const before = await store.get(held.id);
      expect(await submitOnce(store, next, 'keep')).toEqual({
        id: held.id,
        duplicate: true,
        replaced: false,
      });
      expect(await submitOnce(store, next)).toEqual({ id: held.id, duplicate: true, replaced: false });
      const after = await store.get(held.id);
      expect(after?.payload).toEqual({ v: 1 });
      expect(after?.nextRunAt.getTime()).toBe(before?.nextRunAt.getTime());
      expect(after?.updatedAt.getTime()).toBe(before?.updatedAt.getTime());
    });

    it.each([['replace'], ['replace-keep-run-at']] as const)(
      "a RUNNING holder is never changed by '%s': the answer says replaced: false",
      async (onPending) => {
        const store = ctx.store();
        const type = uniqueType();
        const held = await submitOnce(store, {
          ...newCommand(type, { payloadJson: '{"v":1}' }),
          bizKey: 'busy',
        });
        const running = await claimOne(store, type);
        const result = await submitOnce(
          store,
          {
            ...newCommand(type, { payloadJson: '{"v":2}', priority: 9, maxRetry: 0, runAt: later() }),
            bizKey: 'busy',
          },
          onPending,
        );
        expect(result).toEqual({ id: held.id, duplicate: true, replaced: false });
        const after = await store.get(held.id);
        expect(after).toMatchObject({ status: 'RUNNING', payload: { v: 1 }, priority: 0, maxRetry: 3 });
        expect(after?.claimToken).toBe(running.claimToken);
        expect(after?.nextRunAt.getTime()).toBe(running.nextRunAt.getTime());
      },
    );

    it('inserts as usual when no command of the key is unfinished', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const first = await submitOnce(store, { ...newCommand(type), bizKey: 'fresh' }, 'replace');
      expect(first).toMatchObject({ duplicate: false, replaced: false });
      expect((await store.get(first.id))?.idempotent).toBe(true);
      const c = await claimOne(store, type);
      await store.complete([{ id: first.id, token: c.claimToken }]);
      const again = await submitOnce(
        store,
        { ...newCommand(type, { payloadJson: '{"v":"again"}' }), bizKey: 'fresh' },
        'replace-keep-run-at',
      );
      expect(again).toMatchObject({ duplicate: false, replaced: false });
      expect(again.id).not.toBe(first.id);
      expect((await store.get(again.id))?.payload).toEqual({ v: 'again' });
      expect((await store.get(first.id))?.status).toBe('SUCCESS');
    });

    it('a holder waiting for a retry is PENDING: replaced, keeping its retry count and history', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const held = await submitOnce(store, { ...newCommand(type, { maxRetry: 3 }), bizKey: 'retrying' });
      const c = await claimOne(store, type);
      const retryAt = later(300_000);
      expect(
        await store.fail([
          {
            ref: { id: held.id, token: c.claimToken },
            outcome: { status: 'PENDING', retryCount: 1, nextRunAt: retryAt, lastError: 'boom' },
          },
        ]),
      ).toEqual([held.id]);
      const kept = await submitOnce(
        store,
        { ...newCommand(type, { payloadJson: '{"v":"kept-time"}', runAt: later() }), bizKey: 'retrying' },
        'replace-keep-run-at',
      );
      expect(kept).toEqual({ id: held.id, duplicate: true, replaced: true });
      const waiting = await store.get(held.id);
      expect(waiting).toMatchObject({
        status: 'PENDING',
        payload: { v: 'kept-time' },
        retryCount: 1,
        lastError: 'boom',
      });
      expect(waiting?.nextRunAt.getTime()).toBe(retryAt.getTime());
      expect(waiting?.history.map((a) => a.outcome)).toEqual(['failed']);
      const dueAt = later(30_000);
      await submitOnce(
        store,
        { ...newCommand(type, { payloadJson: '{"v":"new-time"}', runAt: dueAt }), bizKey: 'retrying' },
        'replace',
      );
      const moved = await store.get(held.id);
      expect(moved).toMatchObject({ payload: { v: 'new-time' }, retryCount: 1 });
      expect(moved?.nextRunAt.getTime()).toBe(dueAt.getTime());
    });

    it('a replace in a transaction that rolls back replaces nothing', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const held = await submitOnce(store, { ...newCommand(type, { payloadJson: '{"v":1}' }), bizKey: 'rb' });
      const before = await store.get(held.id);
      await expect(
        store.transaction(async (tx) => {
          const r = await store.insertIdempotent(
            tx,
            { ...newCommand(type, { payloadJson: '{"v":2}', runAt: later() }), bizKey: 'rb' },
            { onPending: 'replace' },
          );
          expect(r.replaced).toBe(true);
          throw new Error('rollback');
        }),
      ).rejects.toThrow('rollback');
      const after = await store.get(held.id);
      expect(after?.payload).toEqual({ v: 1 });
      expect(after?.nextRunAt.getTime()).toBe(before?.nextRunAt.getTime());
    });

    it('a replaced command keeps its ordering key and its place under that key', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const held = await submitOnce(store, { ...newCommand(type, { orderingKey: 'line' }), bizKey: 'keyed' });
      const behind = await submitOne(store, newCommand(type, { orderingKey: 'line' }));
      const replaced = await submitOnce(
        store,
        { ...newCommand(type, { payloadJson: '{"v":2}', orderingKey: 'other' }), bizKey: 'keyed' },
        'replace',
      );
      expect(replaced).toEqual({ id: held.id, duplicate: true, replaced: true });
      expect((await store.get(held.id))?.orderingKey).toBe('line');
      const claimed = await claim(store, type);
      expect(claimed.map((c) => [c.id, c.payload])).toEqual([[held.id, { v: 2 }]]);
      expect(behind).not.toBe(held.id);
    });

    it('concurrent replacing submits from two connections leave one command, with one of their contents, and no error', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType();
        const payloads = Array.from({ length: 24 }, (_, i) => `{"n":${i}}`);
        const results = await Promise.all(
          payloads.map((payloadJson, i) =>
            submitOnce(
              i % 2 ? peer : store,
              { ...newCommand(type, { payloadJson }), bizKey: 'race' },
              'replace',
            ),
          ),
        );
        expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
        expect(results.filter((r) => r.duplicate).every((r) => r.replaced)).toBe(true);
        expect(new Set(results.map((r) => r.id)).size).toBe(1);
        const rows = (await store.list({ type })).items;
        expect(rows).toHaveLength(1);
        expect(payloads.map((p) => JSON.parse(p) as unknown)).toContainEqual(rows[0]?.payload);
      } finally {
        await peer.close();
      }
    });

    it('of two replacing transactions on two connections, the one that writes last wins', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType();
        const held = await submitOnce(store, { ...newCommand(type), bizKey: 'last' });
        let release: () => void = () => undefined;
        const gate = new Promise<void>((resolve) => (release = resolve));
        let written: () => void = () => undefined;
        const firstWrote = new Promise<void>((resolve) => (written = resolve));
        const first = store.transaction(async (tx) => {
          const r = await store.insertIdempotent(
            tx,
            { ...newCommand(type, { payloadJson: '{"by":"first"}' }), bizKey: 'last' },
            { onPending: 'replace' },
          );
          written();
          await gate;
          return r;
        });
        await firstWrote;
        // The second waits for the first's lock on the holder (or on the database), then writes.
        const second = submitOnce(
          peer,
          { ...newCommand(type, { payloadJson: '{"by":"second"}' }), bizKey: 'last' },
          'replace',
        );
        release();
        expect(await first).toEqual({ id: held.id, duplicate: true, replaced: true });
        expect(await second).toEqual({ id: held.id, duplicate: true, replaced: true });
        expect((await store.get(held.id))?.payload).toEqual({ by: 'second' });
      } finally {
        await peer.close();
      }
    });

    it('refuses an unknown onPending, or options that are not an object, writing nothing', async () => {
      const store = ctx.store();
      const type = uniqueType();
      for (const options of [{ onPending: 'overwrite' }, { onPending: null }, 'replace', 7]) {
        const code = await rejectionCode(
          store.transaction((tx) =>
            store.insertIdempotent(
              tx,
              { ...newCommand(type), bizKey: 'bad' },
              options as unknown as IdempotentInsertOptions,
            ),
          ),
        );
        expect(code, JSON.stringify(options)).toBe('INVALID_ARGUMENT');
      }
      expect((await store.list({ type })).items).toEqual([]);
    });
  });
}
