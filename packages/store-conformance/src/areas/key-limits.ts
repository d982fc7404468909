import { describe, expect, it } from 'vitest';
import { LIMITS } from '@asynccmd/core';
import type { ClaimedCommand, CommandStore, KeyLimitStore } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import { freshToken, later, newCommand, rejectionCode, submit, uniqueType, useArea } from '../support.js';

/** A claim round that honours the key limits of `keyed` (all of `types` unless told). */
function claimKeyed<Tx>(
  store: CommandStore<Tx>,
  types: readonly string[],
  options: { limit?: number; keyed?: readonly string[] } = {},
): Promise<ClaimedCommand[]> {
  return store.claimDue({
    types,
    keyedTypes: options.keyed ?? types,
    limit: options.limit ?? 100,
    now: later(),
    token: freshToken(),
    leaseMs: 60_000,
  });
}

function limitsOf<Tx>(store: CommandStore<Tx>): KeyLimitStore {
  if (!store.keyLimits) throw new Error(`the ${store.dialect} store keeps no key limits`);
  return store.keyLimits;
}

const refOf = (c: ClaimedCommand) => ({ id: c.id, token: c.claimToken });
const customerOf = (c: ClaimedCommand): unknown => (c.payload as { customerId?: unknown }).customerId;

/** How many of `claimed` there are per customer. */
function perCustomer(claimed: readonly ClaimedCommand[]): Map<unknown, number> {
  const counts = new Map<unknown, number>();
  for (const c of claimed) counts.set(customerOf(c), (counts.get(customerOf(c)) ?? 0) + 1);
  return counts;
}

/** `n` commands of `type` for each customer (the payload's `field`), interleaved. */
function commandsFor(type: string, customers: readonly unknown[], n: number, field = 'customerId') {
  return Array.from({ length: n }, (_, i) =>
    customers.map((key) => newCommand(type, { payloadJson: JSON.stringify({ [field]: key, i }) })),
  ).flat();
}

/**
 * Per-key limits of RUNNING commands: a claim that names a type in `keyedTypes` takes, for each
 * value of the stored key field, at most the places its limit leaves, whoever claims.
 */
export function keyLimitsArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('key limits', () => {
    const ctx = useArea(factory, adapter, 'kyl');

    it('stores key limits, last declaration wins, and refuses bad ones before writing anything', async () => {
      const limits = limitsOf(ctx.store());
      const [a, b] = [uniqueType('a'), uniqueType('b')];
      await limits.declare([
        { type: a, keyField: 'customerId', maxRunning: 2 },
        { type: b, keyField: 'tenant', maxRunning: 7 },
      ]);
      await limits.declare([{ type: a, keyField: 'accountId', maxRunning: 3 }]);
      const stored = (await limits.list()).filter((l) => l.type === a || l.type === b);
      expect(stored).toEqual(
        [
          { type: a, keyField: 'accountId', maxRunning: 3 },
          { type: b, keyField: 'tenant', maxRunning: 7 },
        ].sort((x, y) => (x.type < y.type ? -1 : 1)),
      );
      const c = uniqueType('c');
      const bad: unknown[] = [
        { type: a, keyField: 'customerId', maxRunning: 0 },
        { type: a, keyField: 'customerId', maxRunning: -1 },
        { type: a, keyField: 'customerId', maxRunning: 1.5 },
        { type: a, keyField: 'customerId', maxRunning: LIMITS.keyLimit + 1 },
        { type: a, keyField: '', maxRunning: 1 },
        { type: a, keyField: 'a.b', maxRunning: 1 },
        { type: a, keyField: "x' OR 1=1 --", maxRunning: 1 },
        { type: a, keyField: '1st', maxRunning: 1 },
        { type: a, keyField: 7, maxRunning: 1 },
        { type: '', keyField: 'k', maxRunning: 1 },
        { type: c, keyField: 'k', maxRunning: 2 },
      ];
      for (const limit of bad) {
        expect(
          await rejectionCode(limits.declare([{ type: c, keyField: 'k', maxRunning: 1 }, limit as never])),
          JSON.stringify(limit),
        ).toBe('INVALID_ARGUMENT');
      }
      const after = await limits.list();
      expect(after.find((l) => l.type === c)).toBeUndefined();
      expect(after.find((l) => l.type === a)).toEqual({ type: a, keyField: 'accountId', maxRunning: 3 });
    });

    it('claims at most the limit per key, others beyond a full key, and more as they finish', async () => {
      const store = ctx.store();
      const type = uniqueType('kyl');
      await limitsOf(store).declare([{ type, keyField: 'customerId', maxRunning: 2 }]);
      // c1 first in claim order with 6 commands; c2, c3 (a number) and one without the field behind.
      await submit(store, [
        ...commandsFor(type, ['c1'], 6),
        ...commandsFor(type, ['c2', 3], 3),
        newCommand(type, { payloadJson: '{"other":1}' }),
        newCommand(type, { payloadJson: '{"customerId":null}' }),
      ]);
      const first = await claimKeyed(store, [type]);
      expect(perCustomer(first)).toEqual(
        new Map<unknown, number>([
          ['c1', 2],
          ['c2', 2],
          [3, 2],
          [undefined, 1],
          [null, 1],
        ]),
      );
      expect(await claimKeyed(store, [type])).toEqual([]);
      const c1 = first.filter((c) => customerOf(c) === 'c1');
      expect(await store.complete([refOf(c1[0]!)])).toEqual([c1[0]!.id]);
      const second = await claimKeyed(store, [type]);
      expect(second.map(customerOf)).toEqual(['c1']);
      // The key as text: 3 and "3" are one key.
      await submit(store, [newCommand(type, { payloadJson: '{"customerId":"3"}' })]);
      expect(await claimKeyed(store, [type])).toEqual([]);
      // Without keyedTypes the same claim is the plain one: the key limit is not looked at.
      const plain = await store.claimDue({
        types: [type],
        limit: 100,
        now: later(),
        token: freshToken(),
        leaseMs: 60_000,
      });
      expect(plain.length).toBeGreaterThan(0);
    });

    it('honours the limit, in claim order, and leaves other types to the plain claim', async () => {
      const store = ctx.store();
      const [type, other] = [uniqueType('kyl'), uniqueType('free')];
      await limitsOf(store).declare([{ type, keyField: 'customerId', maxRunning: 1 }]);
      await submit(store, [
        newCommand(type, { payloadJson: '{"customerId":"a","i":0}', priority: 5 }),
        newCommand(type, { payloadJson: '{"customerId":"a","i":1}', priority: -5 }),
        newCommand(other),
        newCommand(other),
      ]);
      const claimed = await claimKeyed(store, [type, other], { keyed: [type], limit: 3 });
      expect(claimed.filter((c) => c.type === type).map((c) => c.payload)).toEqual([
        { customerId: 'a', i: 1 },
      ]);
      expect(claimed.filter((c) => c.type === other)).toHaveLength(2);
      // A listed type without a stored key limit is not claimed.
      const unknown = uniqueType('none');
      await submit(store, [newCommand(unknown)]);
      expect(await claimKeyed(store, [unknown])).toEqual([]);
      // A type within both a type limit and a key limit is refused.
      expect(
        await rejectionCode(
          store.claimDue({
            types: [type],
            keyedTypes: [type],
            limitedTypes: [type],
            limit: 1,
            now: later(),
            token: freshToken(),
            leaseMs: 60_000,
          }),
        ),
      ).toBe('INVALID_ARGUMENT');
    });

    it('concurrent claimers on two connections never exceed the limit of a key', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType('kyl');
        await limitsOf(store).declare([{ type, keyField: 'customerId', maxRunning: 3 }]);
        const customers = ['a', 'b', 'c', 'd', 'e'];
        await submit(store, commandsFor(type, customers, 10));
        const running: ClaimedCommand[] = [];
        for (let round = 0; round < 6; round++) {
          // 8 claimers at once, alternately on each connection, each wanting 4.
          const claims = await Promise.all(
            Array.from({ length: 8 }, (_, i) => claimKeyed(i % 2 ? peer : store, [type], { limit: 4 })),
          );
          running.push(...claims.flat());
          for (const [, n] of perCustomer(running)) expect(n).toBeLessThanOrEqual(3);
          expect(new Set(running.map((c) => c.id)).size).toBe(running.length);
          // Some finish; the next round may claim in their places.
          const done = running.splice(0, 4);
          if (done.length > 0) await store.complete(done.map(refOf));
        }
        expect(running.length).toBeGreaterThan(0);
      } finally {
        await peer.close();
      }
    });

    it('keys what was submitted before the limit, re-keys on a new field, and follows a replaced payload', async () => {
      const store = ctx.store();
      const type = uniqueType('kyl');
      // Submitted while the type has no key limit yet: the declaration keys them.
      await submit(store, commandsFor(type, ['early'], 3));
      await limitsOf(store).declare([{ type, keyField: 'customerId', maxRunning: 1 }]);
      expect((await claimKeyed(store, [type])).map(customerOf)).toEqual(['early']);
      // Another field: the commands waiting are keyed by it from the declaration on.
      const other = uniqueType('kyl');
      await limitsOf(store).declare([{ type: other, keyField: 'customerId', maxRunning: 1 }]);
      await submit(store, [
        newCommand(other, { payloadJson: '{"customerId":"a","accountId":"x"}' }),
        newCommand(other, { payloadJson: '{"customerId":"b","accountId":"x"}' }),
      ]);
      await limitsOf(store).declare([{ type: other, keyField: 'accountId', maxRunning: 1 }]);
      expect(await claimKeyed(store, [other])).toHaveLength(1);
      // A replacing submit that changes the key field moves the command to its new key.
      const moved = uniqueType('kyl');
      await limitsOf(store).declare([{ type: moved, keyField: 'customerId', maxRunning: 1 }]);
      await submit(store, [newCommand(moved, { payloadJson: '{"customerId":"full"}' })]);
      expect(await claimKeyed(store, [moved])).toHaveLength(1);
      const replacing = (customerId: string) =>
        store.transaction((tx) =>
          store.insertIdempotent(
            tx,
            { ...newCommand(moved, { payloadJson: JSON.stringify({ customerId }) }), bizKey: 'b1' },
            { onPending: 'replace' },
          ),
        );
      await replacing('full');
      expect(await claimKeyed(store, [moved])).toEqual([]);
      await replacing('free');
      expect((await claimKeyed(store, [moved])).map(customerOf)).toEqual(['free']);
      // An empty string is no key: not held by the limit.
      const empty = uniqueType('kyl');
      await limitsOf(store).declare([{ type: empty, keyField: 'customerId', maxRunning: 1 }]);
      await submit(store, commandsFor(empty, [''], 3));
      expect(await claimKeyed(store, [empty])).toHaveLength(3);
    });

    it('keysWaiting: the keys with due commands, those at their limit, the top ones by RUNNING; bad input refused', async () => {
      const store = ctx.store();
      const limits = limitsOf(store);
      const type = uniqueType('kyl');
      await limits.declare([{ type, keyField: 'customerId', maxRunning: 2 }]);
      await submit(store, [...commandsFor(type, ['c1'], 4), ...commandsFor(type, ['c2'], 1)]);
      await claimKeyed(store, [type]);
      // c1: 2 running and 2 due; c2: 1 running. Then c3 and a command without a key, and one not due.
      await submit(store, [
        ...commandsFor(type, ['c3'], 2),
        newCommand(type, { payloadJson: '{"other":1}' }),
        newCommand(type, { payloadJson: '{"customerId":"c4"}', runAt: new Date(Date.now() + 3_600_000) }),
      ]);
      const none = uniqueType('none');
      const [waiting, nothing] = await limits.keysWaiting([type, none], later());
      expect(waiting).toEqual({
        type,
        keys: 3,
        atLimit: 1,
        top: [
          { key: 'c1', due: 2, running: 2 },
          { key: '', due: 1, running: 0 },
          { key: 'c3', due: 2, running: 0 },
        ],
      });
      expect(nothing).toEqual({ type: none, keys: 0, atLimit: 0, top: [] });
      expect((await limits.keysWaiting([type], later(), 1))[0]?.top).toEqual([
        { key: 'c1', due: 2, running: 2 },
      ]);
      // A fair-share type has no limit to be at.
      const fair = uniqueType('fair');
      await limits.declare([{ type: fair, keyField: 'tenant', maxRunning: LIMITS.keyLimit }]);
      await submit(store, commandsFor(fair, ['t1', 't2'], 2, 'tenant'));
      expect((await limits.keysWaiting([fair], later()))[0]).toMatchObject({ keys: 2, atLimit: 0 });
      for (const bad of [
        limits.keysWaiting([type], later(), 0),
        limits.keysWaiting([type], later(), 101),
        limits.keysWaiting([''], later()),
        limits.keysWaiting('x' as never, later()),
        limits.keysWaiting([type], new Date(Number.NaN)),
      ]) {
        expect(await rejectionCode(bad)).toBe('INVALID_ARGUMENT');
      }
    });

    it('takes turns across keys: a small key is claimed in the first claim behind a big key’s backlog', async () => {
      const store = ctx.store();
      const type = uniqueType('fair');
      // The most a key limit allows: fair share alone.
      await limitsOf(store).declare([{ type, keyField: 'tenant', maxRunning: LIMITS.keyLimit }]);
      const small = ['s1', 's2', 's3', 's4', 's5'];
      await submit(store, commandsFor(type, ['big'], 50, 'tenant'));
      await submit(store, commandsFor(type, small, 2, 'tenant'));
      const tenantOf = (c: ClaimedCommand): unknown => (c.payload as { tenant?: unknown }).tenant;
      const first = await claimKeyed(store, [type], { limit: 10 });
      expect(new Set(first.map(tenantOf))).toEqual(new Set(['big', ...small]));
      const second = await claimKeyed(store, [type], { limit: 5 });
      const claimedSmall = [...first, ...second].filter((c) => tenantOf(c) !== 'big');
      expect(claimedSmall).toHaveLength(10);
      // One claim of one: the key with fewer running goes first, whatever its due time.
      await submit(store, [newCommand(type, { payloadJson: '{"tenant":"late"}' })]);
      expect((await claimKeyed(store, [type], { limit: 1 })).map(tenantOf)).toEqual(['late']);
      // Priority stays strict across keys.
      await submit(store, [
        newCommand(type, { payloadJson: '{"tenant":"big","urgent":true}', priority: -10 }),
      ]);
      expect((await claimKeyed(store, [type], { limit: 1 })).map((c) => c.payload)).toEqual([
        { tenant: 'big', urgent: true },
      ]);
    });

    it('weighted turns: stored weights give a key w commands per turn, in the claim and in its order; bad weights refused', async () => {
      const store = ctx.store();
      const limits = limitsOf(store);
      const type = uniqueType('wfs');
      await limits.declare([
        { type, keyField: 'tenant', maxRunning: LIMITS.keyLimit, weights: { silver: 2, gold: 3 } },
      ]);
      // Stored in key order, read back as declared.
      expect((await limits.list()).find((l) => l.type === type)).toEqual({
        type,
        keyField: 'tenant',
        maxRunning: LIMITS.keyLimit,
        weights: { gold: 3, silver: 2 },
      });
      await submit(store, commandsFor(type, ['gold', 'silver', 'plain'], 10, 'tenant'));
      const tenantOf = (c: ClaimedCommand): unknown => (c.payload as { tenant?: unknown }).tenant;
      // Turn 1 is three of gold, two of silver, one of plain, each key's in submit order; the
      // claimed rows come back in the order taken (turn, then claim order).
      const first = await claimKeyed(store, [type], { limit: 6 });
      expect(first.map(tenantOf)).toEqual(['gold', 'silver', 'plain', 'gold', 'silver', 'gold']);
      expect(first.map((c) => (c.payload as { i: number }).i)).toEqual([0, 0, 0, 1, 1, 2]);
      // The next claim counts what runs: gold has 3 RUNNING (its turn 1), so turns 2 go on.
      const second = await claimKeyed(store, [type], { limit: 6 });
      expect(perTenant(second)).toEqual(
        new Map([
          ['gold', 3],
          ['silver', 2],
          ['plain', 1],
        ]),
      );
      // Declared again without weights: a turn per command, RUNNING ones counted (6 of gold, 4 of
      // silver, 2 of plain): plain's third and fourth, then silver's fifth.
      await limits.declare([{ type, keyField: 'tenant', maxRunning: LIMITS.keyLimit }]);
      expect((await limits.list()).find((l) => l.type === type)).toEqual({
        type,
        keyField: 'tenant',
        maxRunning: LIMITS.keyLimit,
      });
      expect(perTenant(await claimKeyed(store, [type], { limit: 3 }))).toEqual(
        new Map([
          ['plain', 2],
          ['silver', 1],
        ]),
      );
      // A key limit still holds a weighted key.
      const capped = uniqueType('wcap');
      await limits.declare([{ type: capped, keyField: 'tenant', maxRunning: 2, weights: { gold: 5 } }]);
      await submit(store, commandsFor(capped, ['gold', 'plain'], 5, 'tenant'));
      const held = await claimKeyed(store, [capped], { limit: 10 });
      expect(perTenant(held)).toEqual(
        new Map([
          ['gold', 2],
          ['plain', 2],
        ]),
      );
      for (const weights of [
        { gold: 0 },
        { gold: 1.5 },
        { gold: LIMITS.keyWeight + 1 },
        { '': 2 },
        [2],
        null,
      ]) {
        expect(
          await rejectionCode(
            limits.declare([{ type: capped, keyField: 'tenant', maxRunning: 2, weights: weights as never }]),
          ),
          JSON.stringify(weights),
        ).toBe('INVALID_ARGUMENT');
      }
      expect((await limits.list()).find((l) => l.type === capped)?.weights).toEqual({ gold: 5 });
    });
  });
}

function perTenant(claimed: readonly ClaimedCommand[]): Map<unknown, number> {
  const counts = new Map<unknown, number>();
  for (const c of claimed) {
    const tenant = (c.payload as { tenant?: unknown }).tenant;
    counts.set(tenant, (counts.get(tenant) ?? 0) + 1);
  }
  return counts;
}
