import { describe, expect, it } from 'vitest';
import type { ClaimedCommand } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import { claim, freshToken, later, newCommand, submit, submitOne, uniqueType, useArea } from '../support.js';

const T0 = Date.UTC(2030, 0, 1);
const at = (ms: number): Date => new Date(T0 + ms);

export function claimArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('claim', () => {
    const ctx = useArea(factory, adapter, 'clm');

    it('claims only commands due at `now` (nextRunAt ≤ now, on the application clock)', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const [due, exactly, future] = await submit(store, [
        newCommand(type, { runAt: at(-1) }),
        newCommand(type, { runAt: at(0) }),
        newCommand(type, { runAt: at(1) }),
      ]);
      const first = await claim(store, type, { now: at(0) });
      expect(first.map((c) => c.id)).toEqual([due, exactly]);
      expect(await claim(store, type, { now: at(0) })).toEqual([]);
      const second = await claim(store, type, { now: at(1) });
      expect(second.map((c) => c.id)).toEqual([future]);
    });

    it('claims oldest due first, by nextRunAt then id, up to the limit', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const ids = await submit(store, [
        newCommand(type, { runAt: at(30) }),
        newCommand(type, { runAt: at(10) }),
        newCommand(type, { runAt: at(20) }),
        newCommand(type, { runAt: at(10) }),
        newCommand(type, { runAt: at(5) }),
      ]);
      const [i30, i10a, i20, i10b, i5] = ids;
      const first = await claim(store, type, { now: at(100), limit: 3 });
      expect(first.map((c) => c.id)).toEqual([i5, i10a, i10b]);
      const rest = await claim(store, type, { now: at(100), limit: 3 });
      expect(rest.map((c) => c.id)).toEqual([i20, i30]);
    });

    it('claims only the types asked for; no types claims nothing; limit 0 claims nothing', async () => {
      const store = ctx.store();
      const [a, b, c] = [uniqueType('a'), uniqueType('b'), uniqueType('c')];
      const [ia, ib, ic] = await submit(store, [newCommand(a), newCommand(b), newCommand(c)]);
      expect(await claim(store, [], { limit: 10 })).toEqual([]);
      expect(await claim(store, [a, c], { limit: 0 })).toEqual([]);
      const got = await claim(store, [a, c], { limit: 10 });
      expect(got.map((x) => x.id).sort()).toEqual([ia, ic].sort());
      expect((await store.get(ib!))?.status).toBe('PENDING');
    });

    it('a claim of several types takes the first due commands of all of them in claim order: priority, due time, id', async () => {
      const store = ctx.store();
      const types = [uniqueType('a'), uniqueType('b'), uniqueType('c')];
      // 90 commands spread over the three types, their priorities and due times interleaved across
      // types (ties in due time included), every eleventh not due yet.
      const specs = Array.from({ length: 90 }, (_, g) => ({
        type: types[(g * 7) % 3]!,
        priority: (g * 13) % 4,
        due: ((g * 37) % 50) + (g % 11 === 0 ? 10_000 : 0),
      }));
      const ids = await submit(
        store,
        specs.map((s) => newCommand(s.type, { priority: s.priority, runAt: at(s.due) })),
      );
      const pending = new Set(ids);
      const now = at(100);
      const order = (asked: readonly string[]): string[] =>
        specs
          .map((s, i) => ({ ...s, id: ids[i]! }))
          .filter((s) => asked.includes(s.type) && s.due <= 100 && pending.has(s.id))
          .sort((x, y) => x.priority - y.priority || x.due - y.due || Number(BigInt(x.id) - BigInt(y.id)))
          .map((s) => s.id);
      for (const asked of [[types[0]!, types[1]!], types, [types[2]!, types[0]!]]) {
        for (const limit of [1, 4, 9]) {
          const expected = order(asked).slice(0, limit);
          const got = (await claim(store, asked, { now, limit })).map((c) => c.id);
          expect({ asked, limit, got }).toEqual({ asked, limit, got: expected });
          for (const id of got) pending.delete(id);
        }
      }
    });

    it('claimers of several types on two connections take every due command once, the types in any order', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const types = [uniqueType('a'), uniqueType('b'), uniqueType('c')];
        const ids = await submit(
          store,
          Array.from({ length: 450 }, (_, i) => newCommand(types[i % 3]!, { priority: i % 2 })),
        );
        const drain = async (s: typeof store, asked: readonly string[], limit: number): Promise<string[]> => {
          const got: string[] = [];
          for (;;) {
            const batch = await claim(s, asked, { limit });
            expect(batch.length).toBeLessThanOrEqual(limit);
            if (batch.length === 0) return got;
            got.push(...batch.map((c) => c.id));
          }
        };
        const reversed = [...types].reverse();
        const all = (
          await Promise.all([
            drain(store, types, 7),
            drain(peer, reversed, 11),
            drain(store, reversed, 5),
            drain(peer, types, 3),
          ])
        ).flat();
        expect(all.length).toBe(ids.length);
        expect(new Set(all)).toEqual(new Set(ids));
      } finally {
        await peer.close();
      }
    });

    it('a claim marks RUNNING with the token, startedAt and a lease on the database clock', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type, { payloadJson: '{"n":1}', bizKey: 'k' }));
      const token = freshToken();
      const before = await store.now();
      const [c] = await claim(store, type, { token, leaseMs: 90_000, now: new Date(8.64e15) });
      const after = await store.now();
      expect(c).toMatchObject({
        id,
        type,
        status: 'RUNNING',
        claimToken: token,
        payload: { n: 1 },
        bizKey: 'k',
      });
      // The lease is judged from the database clock, not from the (absurd) application `now`.
      expect(c!.leaseUntil!.getTime()).toBeGreaterThanOrEqual(before.getTime() + 90_000);
      expect(c!.leaseUntil!.getTime()).toBeLessThanOrEqual(after.getTime() + 90_000);
      expect(c!.startedAt!.getTime()).toBeGreaterThanOrEqual(before.getTime());
      expect(c!.startedAt!.getTime()).toBeLessThanOrEqual(after.getTime());
      expect(await store.get(id)).toMatchObject({ status: 'RUNNING', claimToken: token });
    });

    it('claimById claims a due PENDING command of an allowed type, and nothing else', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const [id, notDue] = await submit(store, [
        newCommand(type),
        newCommand(type, { runAt: later(3_600_000) }),
      ]);
      const params = { now: later(), leaseMs: 60_000 };
      expect(
        await store.claimById({ ...params, id: id!, token: freshToken(), types: ['other.type'] }),
      ).toBeNull();
      expect(await store.claimById({ ...params, id: notDue!, token: freshToken() })).toBeNull();
      expect(await store.claimById({ ...params, id: '9223372036854775807', token: freshToken() })).toBeNull();
      const token = freshToken();
      const before = await store.now();
      const c = await store.claimById({ ...params, id: id!, token, types: [type] });
      const after = await store.now();
      expect(c).toMatchObject({ id, status: 'RUNNING', claimToken: token });
      expect(c!.leaseUntil!.getTime()).toBeGreaterThanOrEqual(before.getTime() + 60_000);
      expect(c!.leaseUntil!.getTime()).toBeLessThanOrEqual(after.getTime() + 60_000);
      // Already claimed: a second claimer gets nothing, and the first claim still holds.
      expect(await store.claimById({ ...params, id: id!, token: freshToken() })).toBeNull();
      expect((await store.get(id!))?.claimToken).toBe(token);
      // Nor does the due claim hand it out again.
      expect((await claim(store, type)).map((x) => x.id)).toEqual([]);
    });

    it('two claimers on separate connections never share a row', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType();
        const n = 600;
        const ids = await submit(
          store,
          Array.from({ length: n }, () => newCommand(type)),
        );
        const drain = async (s: typeof store, limit: number): Promise<ClaimedCommand[]> => {
          const got: ClaimedCommand[] = [];
          for (;;) {
            const batch = await claim(s, type, { limit });
            if (batch.length === 0) return got;
            got.push(...batch);
          }
        };
        const results = await Promise.all([
          drain(store, 7),
          drain(peer, 11),
          drain(store, 5),
          drain(peer, 3),
        ]);
        const all = results.flat().map((c) => c.id);
        expect(all.length).toBe(n);
        expect(new Set(all).size).toBe(n);
        expect(new Set(all)).toEqual(new Set(ids));
      } finally {
        await peer.close();
      }
    });

    it('claims by id racing due claims on another connection: every command goes to exactly one claimer', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType();
        const ids = await submit(
          store,
          Array.from({ length: 120 }, () => newCommand(type)),
        );
        const byId = Promise.all(
          ids.map((id) => store.claimById({ id, now: later(), token: freshToken(), leaseMs: 60_000 })),
        );
        const due = (async () => {
          const got: ClaimedCommand[] = [];
          for (
            let batch = await claim(peer, type, { limit: 4 });
            batch.length > 0;
            batch = await claim(peer, type, { limit: 4 })
          ) {
            got.push(...batch);
          }
          return got;
        })();
        const [direct, polled] = await Promise.all([byId, due]);
        const winners = [...direct.filter((c) => c !== null).map((c) => c!.id), ...polled.map((c) => c.id)];
        expect(winners.length).toBe(ids.length);
        expect(new Set(winners)).toEqual(new Set(ids));
        const records = await store.getMany(ids);
        const tokens = new Map(
          [...direct.filter((c) => c !== null), ...polled].map((c) => [c!.id, c!.claimToken]),
        );
        for (const r of records) expect(r.claimToken).toBe(tokens.get(r.id));
      } finally {
        await peer.close();
      }
    });

    it('refuses a bad claim request with a typed error', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const base = { types: [type], limit: 1, now: new Date(), token: freshToken(), leaseMs: 1000 };
      for (const bad of [
        { limit: -1 },
        { limit: 1.5 },
        { leaseMs: 0 },
        { now: new Date(NaN) },
        { token: '' },
      ]) {
        await expect(store.claimDue({ ...base, ...bad })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      }
      await expect(store.claimById({ ...base, id: 'x' })).rejects.toMatchObject({ code: 'INVALID_ID' });
    });
  });
}
