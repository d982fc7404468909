import { describe, expect, it } from 'vitest';
import type { CommandRecord } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  claim,
  newCommand,
  rejectionCode,
  submit,
  submitOne,
  uniqueType,
  untilDatabaseClockPasses,
  useArea,
} from '../support.js';
import { commandIn } from './admin.js';

const byIdDesc = (a: string, b: string): number =>
  BigInt(b) > BigInt(a) ? 1 : BigInt(b) < BigInt(a) ? -1 : 0;

export function readArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('read: get, getMany, list, now, ping', () => {
    const ctx = useArea(factory, adapter, 'red');

    it('get returns null for a missing command; getMany returns the ones that exist', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const ids = await submit(store, [newCommand(type), newCommand(type), newCommand(type)]);
      expect(await store.get('9223372036854775806')).toBeNull();
      const many = await store.getMany([ids[2]!, '9223372036854775806', ids[0]!]);
      expect(many.map((c) => c.id).sort()).toEqual([ids[0], ids[2]].sort());
      expect(await store.getMany([])).toEqual([]);
      expect(many.find((c) => c.id === ids[0])).toEqual(await store.get(ids[0]!));
    });

    it('list filters by type, status and bizKey, newest first', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const other = uniqueType();
      const [a, b, c] = await submit(store, [
        newCommand(type, { bizKey: 'k1' }),
        newCommand(type, { bizKey: 'k2' }),
        newCommand(type, { bizKey: 'k1' }),
        newCommand(other, { bizKey: 'k1' }),
      ]);
      const running = await claim(store, type, { limit: 1 });
      expect(running.map((r) => r.id)).toEqual([a]);
      const ids = (items: CommandRecord[]) => items.map((i) => i.id);
      expect(ids((await store.list({ type })).items)).toEqual([c, b, a]);
      expect(ids((await store.list({ type, status: 'PENDING' })).items)).toEqual([c, b]);
      expect(ids((await store.list({ type, status: ['RUNNING', 'SUCCESS'] })).items)).toEqual([a]);
      expect(ids((await store.list({ type, bizKey: 'k1' })).items)).toEqual([c, a]);
      expect(ids((await store.list({ type, bizKey: 'k1', status: 'PENDING' })).items)).toEqual([c]);
      expect((await store.list({ type, status: [] })).items).toEqual([]);
      expect((await store.list({ type: uniqueType() })).items).toEqual([]);
      expect((await store.list({ type })).nextCursor).toBeNull();
    });

    it('list pages with a cursor that is stable under concurrent inserts', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const ids = await submit(
        store,
        Array.from({ length: 11 }, () => newCommand(type)),
      );
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await store.list({ type, limit: 3, cursor });
        seen.push(...page.items.map((i) => i.id));
        cursor = page.nextCursor ?? undefined;
        pages += 1;
        // Rows submitted while paging are newer than every cursor: they never shift a page.
        await submit(store, [newCommand(type)]);
      } while (cursor !== undefined);
      expect(pages).toBe(4);
      expect(seen).toEqual([...ids].sort(byIdDesc));
    });

    it('list is newest first by creation time, however the instances took their ids', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType();
        const submitted: string[] = [];
        // Two instances submitting in turn, each one strictly later than the one before.
        for (const on of [store, peer, store, peer, store, peer]) {
          const id = await submitOne(on, newCommand(type));
          submitted.push(id);
          await untilDatabaseClockPasses(store, (await store.get(id))!.createdAt);
        }
        const newestFirst = [...submitted].reverse();
        expect((await store.list({ type })).items.map((i) => i.id)).toEqual(newestFirst);
        const paged: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await peer.list({ type, limit: 4, cursor });
          paged.push(...page.items.map((i) => i.id));
          cursor = page.nextCursor ?? undefined;
        } while (cursor !== undefined);
        expect(paged).toEqual(newestFirst);
      } finally {
        await peer.close();
      }
    });

    it('list refuses a bad limit, status or cursor with INVALID_ARGUMENT', async () => {
      const store = ctx.store();
      for (const bad of [
        { limit: 0 },
        { limit: 1001 },
        { limit: 2.5 },
        { cursor: 'not-a-cursor' },
        { cursor: Buffer.from('id:5').toString('base64url') },
        { cursor: Buffer.from('c1:-1:5').toString('base64url') },
        { cursor: Buffer.from('c1:1700000000000:0').toString('base64url') },
        { status: 'DONE' },
      ]) {
        expect(await rejectionCode(store.list(bad as never))).toBe('INVALID_ARGUMENT');
      }
      expect((await store.list({ limit: 1000 })).items.length).toBeLessThanOrEqual(1000);
    });

    it('records in every status read back consistently through get, getMany and list', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const made = [];
      for (const s of ['PENDING', 'RUNNING', 'SUCCESS', 'DEAD', 'CANCELLED'] as const) {
        made.push({ status: s, ...(await commandIn(store, s, type)) });
      }
      const listed = (await store.list({ type })).items;
      expect(listed.map((c) => c.status).sort()).toEqual([
        'CANCELLED',
        'DEAD',
        'PENDING',
        'RUNNING',
        'SUCCESS',
      ]);
      for (const m of made) {
        const one = await store.get(m.id);
        expect(one?.status).toBe(m.status);
        expect(listed.find((c) => c.id === m.id)).toEqual(one);
        expect(one!.finishedAt === null).toBe(m.status === 'PENDING' || m.status === 'RUNNING');
      }
    });

    it('now is the database clock and does not go backwards; ping answers', async () => {
      const store = ctx.store();
      const a = await store.now();
      const b = await store.now();
      expect(Number.isFinite(a.getTime())).toBe(true);
      expect(b.getTime()).toBeGreaterThanOrEqual(a.getTime());
      await expect(store.ping()).resolves.toBeUndefined();
      const id = await submitOne(store, newCommand(uniqueType()));
      const created = (await store.get(id))!.createdAt.getTime();
      expect(created).toBeGreaterThanOrEqual(b.getTime());
      expect(created).toBeLessThanOrEqual((await store.now()).getTime());
    });
  });
}
