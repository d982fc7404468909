import { describe, expect, it } from 'vitest';
import { decideFailure, immediateBackoff, LIMITS } from '@asynccmd/core';
import type { ClaimedCommand, CommandStore, TypeLimitStore } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  freshToken,
  later,
  newCommand,
  rejectionCode,
  submit,
  submitOne,
  uniqueType,
  untilDatabaseClockPasses,
  useArea,
} from '../support.js';

/** A claim round that honours the limits of `limited` (all of `types` unless told). */
function claimLimited<Tx>(
  store: CommandStore<Tx>,
  types: readonly string[],
  options: { limit?: number; limited?: readonly string[]; leaseMs?: number } = {},
): Promise<ClaimedCommand[]> {
  return store.claimDue({
    types,
    limitedTypes: options.limited ?? types,
    limit: options.limit ?? 100,
    now: later(),
    token: freshToken(),
    leaseMs: options.leaseMs ?? 60_000,
  });
}

function limitsOf<Tx>(store: CommandStore<Tx>): TypeLimitStore {
  if (!store.typeLimits) throw new Error(`the ${store.dialect} store keeps no type limits`);
  return store.typeLimits;
}

const refOf = (c: ClaimedCommand) => ({ id: c.id, token: c.claimToken });

/**
 * Per-type limits of RUNNING commands: a claim that names a type in `limitedTypes` takes at most
 * the places its stored limit leaves, whoever claims; completing, failing and reclaiming free them.
 */
export function typeLimitsArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('type limits', () => {
    const ctx = useArea(factory, adapter, 'lim');

    it('stores limits, last declaration wins, and refuses bad ones before writing anything', async () => {
      const limits = limitsOf(ctx.store());
      const [a, b] = [uniqueType('a'), uniqueType('b')];
      await limits.declare([
        { type: a, maxRunning: 2 },
        { type: b, maxRunning: 7 },
      ]);
      await limits.declare([{ type: a, maxRunning: 3 }]);
      const stored = (await limits.list()).filter((l) => l.type === a || l.type === b);
      expect(stored).toEqual(
        [
          { type: a, maxRunning: 3 },
          { type: b, maxRunning: 7 },
        ].sort((x, y) => (x.type < y.type ? -1 : 1)),
      );
      const c = uniqueType('c');
      for (const bad of [0, -1, 1.5, LIMITS.typeLimit + 1, '2' as unknown as number]) {
        expect(
          await rejectionCode(
            limits.declare([
              { type: c, maxRunning: 1 },
              { type: a, maxRunning: bad },
            ]),
          ),
        ).toBe('INVALID_ARGUMENT');
      }
      expect(await rejectionCode(limits.declare([{ type: '', maxRunning: 1 }]))).toBe('INVALID_ARGUMENT');
      expect(
        await rejectionCode(
          limits.declare([
            { type: c, maxRunning: 1 },
            { type: c, maxRunning: 2 },
          ]),
        ),
      ).toBe('INVALID_ARGUMENT');
      const after = await limits.list();
      expect(after.find((l) => l.type === c)).toBeUndefined();
      expect(after.find((l) => l.type === a)).toEqual({ type: a, maxRunning: 3 });
    });

    it('claims at most the limit in one claim, nothing more while they run, and the rest as they finish', async () => {
      const store = ctx.store();
      const type = uniqueType('lim');
      await limitsOf(store).declare([{ type, maxRunning: 3 }]);
      await submit(
        store,
        Array.from({ length: 8 }, () => newCommand(type)),
      );
      const first = await claimLimited(store, [type]);
      expect(first).toHaveLength(3);
      expect(await claimLimited(store, [type])).toEqual([]);
      // Completing one frees one place; a failed attempt (back to PENDING) frees one; a DEAD one too.
      expect(await store.complete([refOf(first[0]!)])).toEqual([first[0]!.id]);
      const second = await claimLimited(store, [type]);
      expect(second).toHaveLength(1);
      const retry = decideFailure(first[1]!, new Error('boom'), new Date(), immediateBackoff);
      expect(await store.fail([{ ref: refOf(first[1]!), outcome: retry }])).toEqual([first[1]!.id]);
      expect(await claimLimited(store, [type], { limit: 10 })).toHaveLength(1);
      expect(await claimLimited(store, [type])).toEqual([]);
      // Without limitedTypes the same claim is the plain one: the limit is not looked at.
      const plain = await store.claimDue({
        types: [type],
        limit: 100,
        now: later(),
        token: freshToken(),
        leaseMs: 60_000,
      });
      expect(plain.length).toBeGreaterThan(0);
    });

    it('a second claimer sees the limit the first one filled', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType('lim');
        await limitsOf(store).declare([{ type, maxRunning: 4 }]);
        await submit(
          store,
          Array.from({ length: 20 }, () => newCommand(type)),
        );
        // Both at once, each asking for more than the limit: together they take exactly 4.
        const [mine, theirs] = await Promise.all([
          claimLimited(store, [type], { limit: 3 }),
          claimLimited(peer, [type], { limit: 3 }),
        ]);
        expect(mine.length + theirs.length).toBe(4);
        expect(await claimLimited(peer, [type])).toEqual([]);
        expect(await claimLimited(store, [type])).toEqual([]);
        await store.complete([...mine, ...theirs].slice(0, 2).map(refOf));
        const again = await Promise.all([claimLimited(store, [type]), claimLimited(peer, [type])]);
        expect(again[0].length + again[1].length).toBe(2);
      } finally {
        await peer.close();
      }
    });

    it('claims limited types first, then fills the round with the others; a type without a stored limit is not claimed', async () => {
      const store = ctx.store();
      const [limited, free, unset] = [uniqueType('lim'), uniqueType('free'), uniqueType('unset')];
      await limitsOf(store).declare([{ type: limited, maxRunning: 2 }]);
      await submit(store, [
        ...Array.from({ length: 3 }, () => newCommand(free, { priority: -5 })),
        ...Array.from({ length: 5 }, () => newCommand(limited)),
        newCommand(unset),
      ]);
      const claimed = await claimLimited(store, [free, limited, unset], {
        limit: 4,
        limited: [limited, unset],
      });
      expect(claimed.map((c) => c.type)).toEqual([limited, limited, free, free]);
      const rest = await claimLimited(store, [free, limited, unset], { limited: [limited, unset] });
      expect(rest.map((c) => c.type)).toEqual([free]);
    });

    it('claimById honours the limit: refused while full (the command stays PENDING), claimed once a place is free', async () => {
      const store = ctx.store();
      const [type, other] = [uniqueType('lim'), uniqueType('free')];
      await limitsOf(store).declare([{ type, maxRunning: 1 }]);
      const [first, second] = await submit(store, [newCommand(type), newCommand(type)]);
      const byId = (id: string, types?: readonly string[]) =>
        store.claimById({
          id,
          now: later(),
          token: freshToken(),
          leaseMs: 60_000,
          limitedTypes: [type],
          ...(types ? { types } : {}),
        });
      const running = await byId(first!);
      expect(running?.id).toBe(first);
      expect(await byId(second!)).toBeNull();
      expect((await store.get(second!))?.status).toBe('PENDING');
      // A command of a type not limited is claimed by id as always.
      const unlimited = await submitOne(store, newCommand(other));
      expect((await byId(unlimited, [other]))?.id).toBe(unlimited);
      await store.complete([refOf(running!)]);
      expect((await byId(second!, [type]))?.id).toBe(second);
      expect(await claimLimited(store, [type])).toEqual([]);
    });

    it('a hung command reclaimed frees its place', async () => {
      const store = ctx.store();
      const type = uniqueType('lim');
      await limitsOf(store).declare([{ type, maxRunning: 1 }]);
      await submit(store, [newCommand(type), newCommand(type)]);
      const [hung] = await claimLimited(store, [type], { leaseMs: 50 });
      expect(await claimLimited(store, [type])).toEqual([]);
      await untilDatabaseClockPasses(store, hung!.leaseUntil!);
      while ((await store.reclaimHung({ limit: 1000, maxRescues: 1000 })).length > 0);
      const next = await claimLimited(store, [type]);
      expect(next).toHaveLength(1);
    });
  });
}
