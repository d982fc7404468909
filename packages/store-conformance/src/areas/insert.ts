import { describe, expect, it } from 'vitest';
import { parseCommandId } from '@asynccmd/core';
import type { CommandRecord } from '@asynccmd/core';
import * as E from 'fp-ts/lib/Either.js';
import type { StoreHarnessFactory } from '../harness.js';
import {
  DuringTransaction,
  newCommand,
  rejectionCode,
  submit,
  submitOne,
  uniqueType,
  useArea,
} from '../support.js';

export function insertArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('insert and transaction', () => {
    const ctx = useArea(factory, adapter, 'ins');

    it('a committed submit is visible, with every field as written', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const runAt = new Date(Date.UTC(2031, 4, 6, 7, 8, 9, 123));
      const before = await store.now();
      const id = await submitOne(
        store,
        newCommand(type, {
          payloadJson: JSON.stringify({ orderId: 42, note: 'Grüße 🚀 订单', items: [1, 2.5, null, true] }),
          bizKey: 'order-42',
          runAt,
          maxRetry: 7,
          owner: 'order-service',
          headers: { traceparent: '00-abc-def-01' },
        }),
      );
      const after = await store.now();
      expect(E.isRight(parseCommandId(id))).toBe(true);
      const c = await store.get(id);
      expect(c).toMatchObject({
        id,
        type,
        bizKey: 'order-42',
        payload: { orderId: 42, note: 'Grüße 🚀 订单', items: [1, 2.5, null, true] },
        status: 'PENDING',
        maxRetry: 7,
        retryCount: 0,
        rescueCount: 0,
        lastError: null,
        owner: 'order-service',
        claimToken: null,
        leaseUntil: null,
        idempotent: false,
        headers: { traceparent: '00-abc-def-01' },
        startedAt: null,
        finishedAt: null,
      });
      expect(c?.nextRunAt.getTime()).toBe(runAt.getTime());
      for (const t of [c!.createdAt, c!.updatedAt]) {
        expect(t.getTime()).toBeGreaterThanOrEqual(before.getTime());
        expect(t.getTime()).toBeLessThanOrEqual(after.getTime());
      }
    });

    it('without runAt a command is due at the database clock of its submit', async () => {
      const store = ctx.store();
      const before = await store.now();
      const id = await submitOne(store, newCommand(uniqueType(), { bizKey: null, owner: null }));
      const after = await store.now();
      const c = await store.get(id);
      expect(c?.nextRunAt.getTime()).toBeGreaterThanOrEqual(before.getTime());
      expect(c?.nextRunAt.getTime()).toBeLessThanOrEqual(after.getTime());
      expect(c).toMatchObject({ bizKey: null, owner: null, headers: {} });
    });

    it('a rolled-back transaction leaves nothing, and the error comes back unchanged', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const boom = new Error('business rule violated');
      const ids: string[] = [];
      const outcome = store.transaction(async (tx) => {
        ids.push(...(await store.insert(tx, [newCommand(type), newCommand(type)])));
        throw boom;
      });
      await expect(outcome).rejects.toBe(boom);
      expect(ids).toHaveLength(2);
      expect(await store.getMany(ids)).toEqual([]);
      expect((await store.list({ type })).items).toEqual([]);
    });

    it('a submit is invisible to other connections until its transaction commits', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType();
        const read = new DuringTransaction<CommandRecord | null>();
        const [id] = await store.transaction(async (tx) => {
          const ids = await store.insert(tx, [newCommand(type)]);
          await read.ask(() => peer.get(ids[0]!));
          read.over();
          return ids;
        });
        // Answered while the transaction was open, it is not there; an answer that came later may
        // have been read before the commit or after it (a store whose transactions take turns).
        const { answer, beforeCommit } = await read.answer;
        if (beforeCommit) expect(answer).toBeNull();
        else expect([null, 'PENDING']).toContain(answer?.status ?? null);
        expect((await peer.get(id!))?.status).toBe('PENDING');
      } finally {
        await peer.close();
      }
    });

    it('a transaction returns what its function returns, and commits everything written in it', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const result = await store.transaction(async (tx) => {
        const a = await store.insert(tx, [newCommand(type)]);
        const b = await store.insert(tx, [newCommand(type)]);
        return [...a, ...b];
      });
      expect(result).toHaveLength(2);
      expect((await store.getMany(result)).map((c) => c.status)).toEqual(['PENDING', 'PENDING']);
    });

    it('a batch insert returns the ids in the order of the commands, and ids are unique', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const n = 1234;
      const ids = await submit(
        store,
        Array.from({ length: n }, (_, i) => newCommand(type, { payloadJson: JSON.stringify({ i }) })),
      );
      expect(ids).toHaveLength(n);
      expect(new Set(ids).size).toBe(n);
      const records = await store.getMany(ids);
      const byId = new Map(records.map((r) => [r.id, r]));
      ids.forEach((id, i) => expect(byId.get(id)?.payload).toEqual({ i }));
    });

    it('an empty batch inserts nothing', async () => {
      const store = ctx.store();
      expect(await submit(store, [])).toEqual([]);
    });

    it('a bad payload in a batch is refused with a typed error and nothing of the batch is written', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const code = await rejectionCode(
        submit(store, [newCommand(type), newCommand(type, { payloadJson: '{"unterminated' })]),
      );
      expect(code).toBe('PAYLOAD_NOT_SERIALISABLE');
      expect((await store.list({ type })).items).toEqual([]);
    });

    it('bad ids are refused with INVALID_ID, unknown ids read as missing', async () => {
      const store = ctx.store();
      for (const bad of ['abc', '0', '-1', '1; DROP TABLE x', '', '99999999999999999999']) {
        expect(await rejectionCode(store.get(bad))).toBe('INVALID_ID');
      }
      expect(await rejectionCode(store.getMany(['1', 'x']))).toBe('INVALID_ID');
      expect(await store.get('9223372036854775807')).toBeNull();
    });
  });
}
