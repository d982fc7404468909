import { describe, expect, it } from 'vitest';
import type { ClaimedCommand, CommandStore, KeyRateLimitStore } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  freshToken,
  later,
  newCommand,
  rejectionCode,
  submit,
  uniqueType,
  untilDatabaseClockPasses,
  useArea,
} from '../support.js';

/** A claim round that honours the per-key rate limits of `rated` (all of `types` unless told). */
function claimRated<Tx>(
  store: CommandStore<Tx>,
  types: readonly string[],
  options: { limit?: number; rated?: readonly string[] } = {},
): Promise<ClaimedCommand[]> {
  return store.claimDue({
    types,
    keyRatedTypes: options.rated ?? types,
    limit: options.limit ?? 100,
    now: later(),
    token: freshToken(),
    leaseMs: 60_000,
  });
}

function limitsOf<Tx>(store: CommandStore<Tx>): KeyRateLimitStore {
  if (!store.keyRateLimits) throw new Error(`the ${store.dialect} store keeps no key rate limits`);
  return store.keyRateLimits;
}

const refOf = (c: ClaimedCommand) => ({ id: c.id, token: c.claimToken });
const tenantOf = (c: ClaimedCommand): unknown => (c.payload as { tenant?: unknown }).tenant;

function perTenant(claimed: readonly ClaimedCommand[]): Map<unknown, number> {
  const counts = new Map<unknown, number>();
  for (const c of claimed) counts.set(tenantOf(c), (counts.get(tenantOf(c)) ?? 0) + 1);
  return counts;
}

function commandsFor(type: string, tenants: readonly unknown[], n: number) {
  return Array.from({ length: n }, (_, i) =>
    tenants.map((tenant) => newCommand(type, { payloadJson: JSON.stringify({ tenant, i }) })),
  ).flat();
}

/** A limit that refills one token an hour: nothing comes back while a test runs. */
const SLOW = { keyField: 'tenant', maxStarts: 3, periodMs: 3_600_000, burst: 2 };

/**
 * Rate limits per key: a claim that names a type in `keyRatedTypes` takes, for each value of the
 * stored key field, at most the whole tokens of that key's bucket, refilled on the database clock.
 */
export function keyRateLimitsArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('key rate limits', () => {
    const ctx = useArea(factory, adapter, 'krl');

    it('stores limits (burst defaulted), last declaration wins, and refuses bad ones writing nothing', async () => {
      const limits = limitsOf(ctx.store());
      const [a, b] = [uniqueType('a'), uniqueType('b')];
      await limits.declare([
        { type: a, keyField: 'tenant', maxStarts: 100, periodMs: 60_000 },
        { type: b, keyField: 'customerId', maxStarts: 5, periodMs: 1_000, burst: 4 },
      ]);
      await limits.declare([{ type: a, keyField: 'account', maxStarts: 20, periodMs: 1_000 }]);
      const stored = (await limits.list()).filter((l) => l.type === a || l.type === b);
      expect(stored).toEqual(
        [
          { type: a, keyField: 'account', maxStarts: 20, periodMs: 1_000, burst: 2 },
          { type: b, keyField: 'customerId', maxStarts: 5, periodMs: 1_000, burst: 4 },
        ].sort((x, y) => (x.type < y.type ? -1 : 1)),
      );
      const c = uniqueType('c');
      const bad: unknown[] = [
        { type: a, keyField: 'tenant', maxStarts: 1, periodMs: 1_000 },
        { type: a, keyField: 'tenant', maxStarts: 0, periodMs: 1_000 },
        { type: a, keyField: 'tenant', maxStarts: 10, periodMs: 0 },
        { type: a, keyField: 'tenant', maxStarts: 10, periodMs: -5 },
        { type: a, keyField: 'tenant', maxStarts: 10, periodMs: 1_000, burst: 10 },
        { type: a, keyField: 'tenant', maxStarts: 10, periodMs: 1_000, window: 1 },
        { type: a, keyField: 'a.b', maxStarts: 10, periodMs: 1_000 },
        { type: a, keyField: '', maxStarts: 10, periodMs: 1_000 },
        { type: '', keyField: 'tenant', maxStarts: 10, periodMs: 1_000 },
        { type: c, keyField: 'tenant', maxStarts: 10, periodMs: 1_000 },
      ];
      for (const limit of bad) {
        expect(
          await rejectionCode(
            limits.declare([{ type: c, keyField: 'tenant', maxStarts: 3, periodMs: 1_000 }, limit as never]),
          ),
          JSON.stringify(limit),
        ).toBe('INVALID_ARGUMENT');
      }
      const after = await limits.list();
      expect(after.find((l) => l.type === c)).toBeUndefined();
      expect(after.find((l) => l.type === a)?.keyField).toBe('account');
    });

    it('claims at most a key’s burst, then nothing of that key until it refills, whatever finished', async () => {
      const store = ctx.store();
      const type = uniqueType('krl');
      await limitsOf(store).declare([{ type, ...SLOW }]);
      await submit(store, [
        ...commandsFor(type, ['a', 'b'], 5),
        newCommand(type, { payloadJson: '{"other":1}' }),
        newCommand(type, { payloadJson: '{"other":2}' }),
      ]);
      const first = await claimRated(store, [type]);
      expect(perTenant(first)).toEqual(
        new Map<unknown, number>([
          ['a', 2],
          ['b', 2],
          [undefined, 2],
        ]),
      );
      // A rate limits starts, not running commands: finishing them gives nothing back.
      await store.complete(first.map(refOf));
      expect(await claimRated(store, [type])).toEqual([]);
      // A new key has a full bucket.
      await submit(store, commandsFor(type, ['c'], 3));
      expect(perTenant(await claimRated(store, [type]))).toEqual(new Map([['c', 2]]));
      // A listed type without a stored limit is not claimed; a type in two kinds of limit is refused.
      const unknown = uniqueType('none');
      await submit(store, [newCommand(unknown)]);
      expect(await claimRated(store, [unknown])).toEqual([]);
      expect(
        await rejectionCode(
          store.claimDue({
            types: [type],
            keyRatedTypes: [type],
            keyedTypes: [type],
            limit: 1,
            now: later(),
            token: freshToken(),
            leaseMs: 60_000,
          }),
        ),
      ).toBe('INVALID_ARGUMENT');
    });

    it('refills each key’s bucket on the database clock, never beyond its burst', async () => {
      const store = ctx.store();
      const type = uniqueType('krl');
      // 10 a second sustained, burst 1: a token every 100 ms.
      await limitsOf(store).declare([{ type, keyField: 'tenant', maxStarts: 11, periodMs: 1_000, burst: 1 }]);
      await submit(store, commandsFor(type, ['a'], 6));
      const first = await claimRated(store, [type]);
      expect(first).toHaveLength(1);
      await untilDatabaseClockPasses(store, new Date((await store.now()).getTime() + 350));
      // Three tokens' worth of time, one token's room.
      expect(await claimRated(store, [type])).toHaveLength(1);
    });

    it('concurrent claimers on two connections take no more than each key’s bucket', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType('krl');
        await limitsOf(store).declare([{ type, ...SLOW, maxStarts: 5, burst: 4 }]);
        const tenants = ['a', 'b', 'c', 'd'];
        await submit(store, commandsFor(type, tenants, 8));
        const claims = await Promise.all(
          Array.from({ length: 8 }, (_, i) => claimRated(i % 2 ? peer : store, [type], { limit: 3 })),
        );
        const claimed = claims.flat();
        expect(new Set(claimed.map((c) => c.id)).size).toBe(claimed.length);
        expect(perTenant(claimed)).toEqual(new Map(tenants.map((t) => [t, 4])));
        expect(await claimRated(peer, [type])).toEqual([]);
      } finally {
        await peer.close();
      }
    });
  });
}
