import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import { decideFailure, immediateBackoff, LIMITS } from '@asynccmd/core';
import type { CommandId, CommandStore, DependencyRef, DependencyStore, NewCommand } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  claim,
  claimOne,
  freshToken,
  later,
  newCommand,
  rejectionCode,
  submitOne,
  uniqueType,
  useArea,
} from '../support.js';

/** The store's dependencies, failing loudly where it has none (every adapter here has them). */
export function dependenciesOf<Tx>(store: CommandStore<Tx>): DependencyStore<Tx> {
  const deps = store.dependencies;
  if (deps === undefined) throw new Error(`the ${store.dialect} store has no dependencies`);
  return deps;
}

/** Submits one command waiting for `dependsOn`, in a transaction of the store's. */
export async function submitWaiting<Tx>(
  store: CommandStore<Tx>,
  command: NewCommand,
  dependsOn: readonly (CommandId | DependencyRef)[],
): Promise<CommandId> {
  const refs = dependsOn.map((d) => (typeof d === 'string' ? { id: d } : d));
  const [id] = await store.transaction((tx) =>
    dependenciesOf(store).insertWaiting(tx, [{ ...command, dependsOn: refs }]),
  );
  if (id === undefined) throw new Error('insertWaiting returned no id');
  return id;
}

async function statusOf<Tx>(store: CommandStore<Tx>, id: CommandId): Promise<string | undefined> {
  return (await store.get(id))?.status;
}

/** Claims `id` (due now) and completes it. */
async function succeed<Tx>(store: CommandStore<Tx>, id: CommandId, resultJson?: string): Promise<void> {
  const c = await store.claimById({ id, now: later(), token: freshToken(), leaseMs: 60_000 });
  if (!c) throw new Error(`could not claim ${id}`);
  const attempt =
    resultJson === undefined ? { id, token: c.claimToken } : { id, token: c.claimToken, resultJson };
  expect(await store.complete([attempt])).toEqual([id]);
}

/** Claims `id` and fails it for good (maxRetry 0 in these tests). */
async function die<Tx>(store: CommandStore<Tx>, id: CommandId): Promise<void> {
  const c = await store.claimById({ id, now: later(), token: freshToken(), leaseMs: 60_000 });
  if (!c) throw new Error(`could not claim ${id}`);
  const outcome = decideFailure(c, new Error('boom'), new Date(), immediateBackoff);
  expect(outcome.status).toBe('DEAD');
  expect(await store.fail([{ ref: { id, token: c.claimToken }, outcome }])).toEqual([id]);
}

/** Ids (decimal text) in numeric order. */
export function byId(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

export function dependenciesArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('dependencies', () => {
    const ctx = useArea(factory, adapter, 'dep');
    const cmd = (type: string): NewCommand => newCommand(type, { maxRetry: 0 });

    it('a dependant is WAITING and out of every claim until its dependency succeeded, then PENDING', async () => {
      const store = ctx.store();
      const type = uniqueType('dep');
      const first = await submitOne(store, cmd(type));
      const second = await submitWaiting(store, cmd(type), [first]);
      expect(await statusOf(store, second)).toBe('WAITING');
      expect(
        await store.claimById({ id: second, now: later(), token: freshToken(), leaseMs: 60_000 }),
      ).toBeNull();
      const claimed = await claim(store, type);
      expect(claimed.map((c) => c.id)).toEqual([first]);
      expect(await claim(store, type)).toEqual([]);
      expect(await store.complete([{ id: first, token: claimed[0]!.claimToken }])).toEqual([first]);
      expect(await statusOf(store, second)).toBe('PENDING');
      expect((await claimOne(store, type)).id).toBe(second);
    });

    it('waits for every dependency: released by the last to succeed, whichever it is', async () => {
      const store = ctx.store();
      const type = uniqueType('dep');
      const a = await submitOne(store, cmd(type));
      const b = await submitOne(store, cmd(type));
      const c = await submitOne(store, cmd(type));
      const d = await submitWaiting(store, cmd(type), [a, b, c]);
      await succeed(store, b);
      await succeed(store, a);
      expect(await statusOf(store, d)).toBe('WAITING');
      await succeed(store, c);
      expect(await statusOf(store, d)).toBe('PENDING');
    });

    it('a dependency that ends DEAD cancels its dependants, and theirs (the default rule)', async () => {
      const store = ctx.store();
      const type = uniqueType('dep');
      const a = await submitOne(store, cmd(type));
      const b = await submitWaiting(store, cmd(type), [a]);
      const c = await submitWaiting(store, cmd(type), [b]);
      const other = await submitOne(store, cmd(type));
      const d = await submitWaiting(store, cmd(type), [other, { id: b, onFailure: 'continue' }]);
      await die(store, a);
      expect(await store.get(b)).toMatchObject({ status: 'CANCELLED' });
      expect((await store.get(b))?.lastError).toMatch(/depends on/);
      expect(await statusOf(store, c)).toBe('CANCELLED');
      // d counts b's cancellation as finished ('continue'); it still waits for `other`.
      expect(await statusOf(store, d)).toBe('WAITING');
      await succeed(store, other);
      expect(await statusOf(store, d)).toBe('PENDING');
    });

    it("with 'continue', a DEAD or CANCELLED dependency releases the dependant as a success would", async () => {
      const store = ctx.store();
      const type = uniqueType('dep');
      const a = await submitOne(store, cmd(type));
      const b = await submitOne(store, cmd(type));
      const callback = await submitWaiting(store, cmd(type), [
        { id: a, onFailure: 'continue' },
        { id: b, onFailure: 'continue' },
      ]);
      await die(store, a);
      expect(await statusOf(store, callback)).toBe('WAITING');
      expect(E.isRight(await store.cancel(b, 'not needed'))).toBe(true);
      expect(await statusOf(store, callback)).toBe('PENDING');
      const seen = await dependenciesOf(store).dependenciesOf(callback);
      expect(seen.map((s) => [s.id, s.status, s.onFailure])).toEqual([
        [a, 'DEAD', 'continue'],
        [b, 'CANCELLED', 'continue'],
      ]);
    });

    it('kill and cancel of a dependency cancel its dependants; a WAITING command may be cancelled and killed', async () => {
      const store = ctx.store();
      const type = uniqueType('dep');
      const a = await submitOne(store, cmd(type));
      const b = await submitWaiting(store, cmd(type), [a]);
      expect(E.isRight(await store.kill(a, 'stop'))).toBe(true);
      expect(await statusOf(store, b)).toBe('CANCELLED');
      const c = await submitOne(store, cmd(type));
      const d = await submitWaiting(store, cmd(type), [c]);
      const e = await submitWaiting(store, cmd(type), [d]);
      const cancelled = await store.cancel(d, 'not wanted');
      expect(E.isRight(cancelled) && cancelled.right.status).toBe('CANCELLED');
      expect(await statusOf(store, e)).toBe('CANCELLED');
      // A person's cancellation is final: d's dependency succeeding does not bring it back.
      await succeed(store, c);
      expect(await statusOf(store, d)).toBe('CANCELLED');
      expect(await statusOf(store, e)).toBe('CANCELLED');
    });

    it('a cancellation cascades down a chain as long as a workflow may have (LIMITS.workflowDepth), in one transaction', async () => {
      const store = ctx.store();
      const type = uniqueType('dep');
      const root = await submitOne(store, cmd(type));
      const chain = await store.transaction(async (tx) => {
        const ids: CommandId[] = [];
        let previous = root;
        for (let i = 1; i < LIMITS.workflowDepth; i++) {
          const [id] = await dependenciesOf(store).insertWaiting(tx, [
            { ...cmd(type), dependsOn: [{ id: previous }] },
          ]);
          ids.push(id!);
          previous = id!;
        }
        return ids;
      });
      expect(E.isRight(await store.cancel(root, 'stop'))).toBe(true);
      const statuses = new Set((await store.getMany(chain)).map((r) => r.status));
      expect(statuses).toEqual(new Set(['CANCELLED']));
    });

    it('an admin retry of the DEAD dependency that then succeeds resumes what it cancelled', async () => {
      const store = ctx.store();
      const type = uniqueType('dep');
      const a = await submitOne(store, cmd(type));
      const b = await submitWaiting(store, cmd(type), [a]);
      const c = await submitWaiting(store, cmd(type), [b]);
      await die(store, a);
      expect([await statusOf(store, b), await statusOf(store, c)]).toEqual(['CANCELLED', 'CANCELLED']);
      expect(E.isRight(await store.retry(a, new Date()))).toBe(true);
      // Retried, not yet succeeded: its dependants stay cancelled.
      expect(await statusOf(store, b)).toBe('CANCELLED');
      await die(store, a);
      expect(E.isRight(await store.retry(a, new Date()))).toBe(true);
      await succeed(store, a);
      expect(await store.get(b)).toMatchObject({ status: 'PENDING', lastError: null, finishedAt: null });
      expect(await statusOf(store, c)).toBe('WAITING');
      await succeed(store, b);
      expect(await statusOf(store, c)).toBe('PENDING');
    });

    it('a dependency finished before the submit: SUCCESS leaves it PENDING at once, DEAD cancels it at once', async () => {
      const store = ctx.store();
      const type = uniqueType('dep');
      const done = await submitOne(store, cmd(type));
      await succeed(store, done);
      expect(await statusOf(store, await submitWaiting(store, cmd(type), [done]))).toBe('PENDING');
      const dead = await submitOne(store, cmd(type));
      await die(store, dead);
      const blocked = await submitWaiting(store, cmd(type), [done, dead]);
      expect(await statusOf(store, blocked)).toBe('CANCELLED');
      const continuing = await submitWaiting(store, cmd(type), [{ id: dead, onFailure: 'continue' }]);
      expect(await statusOf(store, continuing)).toBe('PENDING');
      // The retried dead dependency that succeeds resumes the one it blocked at its submit.
      expect(E.isRight(await store.retry(dead, new Date()))).toBe(true);
      await succeed(store, dead);
      expect(await statusOf(store, blocked)).toBe('PENDING');
    });

    it('a dependant reads its dependencies: state and result', async () => {
      const store = ctx.store();
      const type = uniqueType('dep');
      const a = await submitOne(store, cmd(type));
      const b = await submitOne(store, cmd(type));
      const c = await submitWaiting(store, cmd(type), [a, b]);
      await succeed(store, a, '{"total": 42}');
      const seen = await dependenciesOf(store).dependenciesOf(c);
      expect(seen).toEqual([
        { id: a, type, status: 'SUCCESS', onFailure: 'cancel', result: { total: 42 } },
        { id: b, type, status: 'PENDING', onFailure: 'cancel', result: null },
      ]);
    });

    it('a dependency that does not exist is NOT_FOUND, bad input INVALID_ARGUMENT; nothing is written', async () => {
      const store = ctx.store();
      const type = uniqueType('dep');
      const a = await submitOne(store, cmd(type));
      const deps = dependenciesOf(store);
      const attempt = (dependsOn: unknown) =>
        store.transaction((tx) =>
          deps.insertWaiting(tx, [{ ...cmd(type), dependsOn: dependsOn as DependencyRef[] }]),
        );
      expect(await rejectionCode(attempt([{ id: a }, { id: '999999999999' }]))).toBe('NOT_FOUND');
      expect(await rejectionCode(attempt([]))).toBe('INVALID_ARGUMENT');
      expect(await rejectionCode(attempt([{ id: a }, { id: a }]))).toBe('INVALID_ARGUMENT');
      expect(await rejectionCode(attempt([{ id: a, onFailure: 'ignore' }]))).toBe('INVALID_ARGUMENT');
      expect(await rejectionCode(attempt([{ id: 'x' }]))).toBe('INVALID_ID');
      expect((await store.list({ type })).items.map((r) => r.id)).toEqual([a]);
    });

    it('a rolled-back submit leaves no dependant, and its dependency ends as if it had none', async () => {
      const store = ctx.store();
      const type = uniqueType('dep');
      const a = await submitOne(store, cmd(type));
      await expect(
        store.transaction(async (tx) => {
          await dependenciesOf(store).insertWaiting(tx, [{ ...cmd(type), dependsOn: [{ id: a }] }]);
          throw new Error('business rule failed');
        }),
      ).rejects.toThrow('business rule failed');
      expect((await store.list({ type })).items.map((r) => r.id)).toEqual([a]);
      await succeed(store, a);
    });

    it('with transactional completion, the SUCCESS and the release commit together; a rollback releases nothing', async () => {
      const store = ctx.store();
      const completion = store.transactionalCompletion;
      if (completion === undefined)
        throw new Error(`the ${store.dialect} store has no transactionalCompletion`);
      const type = uniqueType('dep');
      const a = await submitOne(store, cmd(type));
      const b = await submitWaiting(store, cmd(type), [a]);
      const first = await claimOne(store, type);
      await expect(
        store.transaction(async (tx) => {
          expect(await completion.complete(tx, { id: a, token: first.claimToken })).toBe(true);
          throw new Error('the effects failed');
        }),
      ).rejects.toThrow('the effects failed');
      expect([await statusOf(store, a), await statusOf(store, b)]).toEqual(['RUNNING', 'WAITING']);
      await store.transaction(async (tx) => {
        expect(await completion.complete(tx, { id: a, token: first.claimToken })).toBe(true);
      });
      expect([await statusOf(store, a), await statusOf(store, b)]).toEqual(['SUCCESS', 'PENDING']);
    });

    it('a completion through an SqlExecutor (an ORM bridge) releases the dependants with its commit, or not at all', async () => {
      const store = ctx.store();
      const completion = store.transactionalCompletion;
      const wrap = ctx.harness().sqlExecutor;
      if (completion?.throughSqlExecutor !== true || wrap === undefined) return;
      const type = uniqueType('dep');
      const a = await submitOne(store, cmd(type));
      const b = await submitWaiting(store, cmd(type), [a]);
      const held = await claimOne(store, type);
      await expect(
        store.transaction(async (tx) => {
          expect(await completion.complete(wrap(tx), { id: a, token: held.claimToken })).toBe(true);
          throw new Error('the effects failed');
        }),
      ).rejects.toThrow('the effects failed');
      expect([await statusOf(store, a), await statusOf(store, b)]).toEqual(['RUNNING', 'WAITING']);
      await store.transaction(async (tx) => {
        expect(await completion.complete(wrap(tx), { id: a, token: held.claimToken })).toBe(true);
      });
      expect([await statusOf(store, a), await statusOf(store, b)]).toEqual(['SUCCESS', 'PENDING']);
    });

    it('a reclaim past the rescue limit (DEAD) cancels the dependants', async () => {
      const store = ctx.store();
      const type = uniqueType('dep');
      const a = await submitOne(store, cmd(type));
      const b = await submitWaiting(store, cmd(type), [a]);
      await store.claimById({ id: a, now: later(), token: freshToken(), leaseMs: 1 });
      for (let i = 0; i < 500 && (await statusOf(store, a)) === 'RUNNING'; i++) {
        await store.reclaimHung({ limit: 100, maxRescues: 0 });
      }
      expect(await statusOf(store, a)).toBe('DEAD');
      expect(await statusOf(store, b)).toBe('CANCELLED');
    });

    it('a dependant submitted while its dependency is being completed elsewhere is released by that completion', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const type = uniqueType('racing');
        const [dependency] = await store.transaction((tx) => store.insert(tx, [cmd(type)]));
        const running = await claimOne(store, type);
        let commitSubmit!: () => void;
        const submitHeld = new Promise<void>((resolve) => (commitSubmit = resolve));
        let submitted!: () => void;
        const edgeWritten = new Promise<void>((resolve) => (submitted = resolve));
        // The submit locks the RUNNING dependency and writes its edge, then holds its transaction
        // open while the completion, on another instance, starts and waits for that lock.
        const dependantType = uniqueType('racing-dependant');
        const submit = store.transaction(async (tx) => {
          const [id] = await dependenciesOf(store).insertWaiting(tx, [
            { ...cmd(dependantType), dependsOn: [{ id: dependency! }] },
          ]);
          submitted();
          await submitHeld;
          return id!;
        });
        await edgeWritten;
        const completion = peer.complete([{ id: dependency!, token: running.claimToken }]);
        await new Promise((resolve) => setTimeout(resolve, 300));
        commitSubmit();
        const dependant = await submit;
        expect(await completion).toEqual([dependency]);
        expect(await statusOf(store, dependant)).toBe('PENDING');
        expect((await claim(store, dependantType)).map((c) => c.id)).toEqual([dependant]);
      } finally {
        await peer.close();
      }
    });

    it('a batch callback is released exactly once when the last members finish at the same moment on two instances', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        for (let round = 0; round < 5; round++) {
          const type = uniqueType('batch');
          const members = await store.transaction((tx) =>
            store.insert(
              tx,
              Array.from({ length: 6 }, () => cmd(type)),
            ),
          );
          const callbackType = uniqueType('callback');
          const callback = await submitWaiting(
            store,
            cmd(callbackType),
            members.map((id) => ({ id, onFailure: 'continue' as const })),
          );
          const claimed = await claim(store, type, { limit: 6 });
          expect(claimed).toHaveLength(6);
          const [x, y, ...rest] = claimed;
          await store.complete(rest.slice(0, 2).map((c) => ({ id: c.id, token: c.claimToken })));
          const dead = rest[2]!;
          await store.fail([
            {
              ref: { id: dead.id, token: dead.claimToken },
              outcome: decideFailure(dead, new Error('x'), new Date(), immediateBackoff),
            },
          ]);
          expect(E.isRight(await store.kill(rest[3]!.id, 'stop'))).toBe(true);
          expect(await statusOf(store, callback)).toBe('WAITING');
          // The last two members, at once, each on its own instance.
          await Promise.all([
            store.complete([{ id: x!.id, token: x!.claimToken }]),
            peer.complete([{ id: y!.id, token: y!.claimToken }]),
          ]);
          expect(await statusOf(store, callback)).toBe('PENDING');
          const [one, two] = await Promise.all([claim(store, callbackType), claim(peer, callbackType)]);
          expect([...one!, ...two!].map((c) => c.id)).toEqual([callback]);
          const counts = (await dependenciesOf(store).dependenciesOf(callback)).reduce<
            Record<string, number>
          >((acc, d) => ({ ...acc, [d.status]: (acc[d.status] ?? 0) + 1 }), {});
          expect(counts).toEqual({ SUCCESS: 4, DEAD: 1, CANCELLED: 1 });
        }
      } finally {
        await peer.close();
      }
    });

    it('under 8 concurrent claimers, no dependant is claimed before all its dependencies succeeded', async () => {
      const store = ctx.store();
      const peers = await Promise.all(Array.from({ length: 3 }, () => ctx.harness().openPeer()));
      const stores = [store, ...peers];
      try {
        const type = uniqueType('graph');
        // Three layers: 12 roots, 12 middles each waiting for two roots, 4 tails each for three middles.
        const roots = await store.transaction((tx) =>
          store.insert(
            tx,
            Array.from({ length: 12 }, () => cmd(type)),
          ),
        );
        const middles: CommandId[] = [];
        for (let i = 0; i < 12; i++) {
          middles.push(await submitWaiting(store, cmd(type), [roots[i]!, roots[(i + 1) % 12]!]));
        }
        const tails: CommandId[] = [];
        for (let i = 0; i < 4; i++) {
          tails.push(await submitWaiting(store, cmd(type), middles.slice(i * 3, i * 3 + 3)));
        }
        const dependsOn = new Map<CommandId, CommandId[]>();
        middles.forEach((m, i) => dependsOn.set(m, [roots[i]!, roots[(i + 1) % 12]!]));
        tails.forEach((t, i) => dependsOn.set(t, middles.slice(i * 3, i * 3 + 3)));
        const succeeded = new Set<CommandId>();
        const violations: string[] = [];
        const total = roots.length + middles.length + tails.length;
        const worker = async (s: CommandStore<Tx>): Promise<void> => {
          for (let idle = 0; succeeded.size < total && idle < 2000;) {
            const got = await claim(s, type, { limit: 2 });
            if (got.length === 0) {
              idle += 1;
              await new Promise((r) => setTimeout(r, 2));
              continue;
            }
            // What the database says while the claim holds: every dependency SUCCESS.
            for (const c of got) {
              const deps = await dependenciesOf(s).dependenciesOf(c.id);
              expect(deps.map((d) => d.id)).toEqual([...(dependsOn.get(c.id) ?? [])].sort(byId));
              for (const d of deps) {
                if (d.status !== 'SUCCESS') violations.push(`${c.id} claimed while ${d.id} was ${d.status}`);
              }
            }
            const done = await s.complete(got.map((c) => ({ id: c.id, token: c.claimToken })));
            for (const id of done) succeeded.add(id);
          }
        };
        await Promise.all(Array.from({ length: 8 }, (_, i) => worker(stores[i % stores.length]!)));
        expect(violations).toEqual([]);
        expect(succeeded.size).toBe(total);
      } finally {
        await Promise.all(peers.map((p) => p.close()));
      }
    });
  });
}
