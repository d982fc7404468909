import { afterEach, describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import { immediateBackoff, type CommandEvent, type CommandStore } from '@asynccmd/core';
import {
  createAsyncCommands,
  defineExecutor,
  defineTransactionalExecutor,
  workflowStatus,
  type AnyExecutor,
  type AsyncCommandsOptions,
  type TransactionalContext,
} from '@asynccmd/runtime';
import type { RuntimeHarness, RuntimeHarnessFactory } from './harness.js';

/**
 * The application table a transactional executor writes to, in the store's own database, through
 * the store's raw transaction handle. It has no unique constraint: a double write would show as a
 * second row, never be hidden by a refused insert.
 */
export interface EffectTable<Tx> {
  /** Creates the table (in a transaction of the store's). */
  create(tx: Tx, store: CommandStore<Tx>): Promise<void>;
  /** Inserts one row for `commandId` on the executor's transaction handle. */
  insert(tx: Tx, store: CommandStore<Tx>, commandId: string, attempt: number): Promise<void>;
  /** Rows per command id (in a transaction of the store's, after the fact). */
  count(tx: Tx, store: CommandStore<Tx>): Promise<Map<string, number>>;
  /** A statement that fails (the executor catches its error), on the executor's handle. */
  fail(tx: Tx): Promise<void>;
}

export interface TransactionalE2EFeatures {
  /**
   * Another connection's write waits for an open transaction (SQLite's one writer): a claim cannot
   * be taken away while a transactional attempt runs, only before its transaction begins.
   */
  readonly oneWriter: boolean;
  /** The store has connections that can be lost (not embedded SQLite): such a loss is no failure of the attempt. */
  readonly connections: boolean;
  /** A failed statement leaves the transaction refusing every statement until a rollback (PostgreSQL). */
  readonly abortsOnError: boolean;
}

async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 15_000) {
  const until = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function gate(): { promise: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

const kinds = (events: CommandEvent[], kind: CommandEvent['kind']) => events.filter((e) => e.kind === kind);

/**
 * Transactional executors end to end: real store, real runtime, an application table in the same
 * database. Every adapter runs it with its own harness and effect table.
 */
export function describeTransactionalE2E<Tx>(
  name: string,
  harnessFactory: RuntimeHarnessFactory<Tx>,
  effects: EffectTable<Tx>,
  features: TransactionalE2EFeatures,
): void {
  describe(`transactional executors on ${name}`, () => {
    let harness: RuntimeHarness<Tx> | null = null;
    const cleanups: (() => Promise<void>)[] = [];
    let seq = 0;

    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
      await harness?.dispose();
      harness = null;
    });

    async function openStore(): Promise<CommandStore<Tx>> {
      harness ??= await harnessFactory(`etx_${process.pid}_${++seq}_${Math.floor(Math.random() * 1e6)}`);
      return harness.openStore();
    }

    async function instance(
      executors: readonly AnyExecutor[],
      options: Partial<AsyncCommandsOptions<Tx>> = {},
    ) {
      const store = options.store ?? (await openStore());
      await store.transaction((tx) => effects.create(tx, store));
      const runtime = createAsyncCommands<readonly AnyExecutor[], Tx>({
        pollIntervalMs: 20,
        backoff: immediateBackoff,
        ...options,
        store,
        executors,
      });
      const events: CommandEvent[] = [];
      runtime.on((e) => events.push(e));
      cleanups.push(() => runtime.stop({ timeoutMs: 2_000, closeStore: false }));
      runtime.start();
      return { runtime, events, store };
    }

    const countEffects = (store: CommandStore<Tx>) => store.transaction((tx) => effects.count(tx, store));

    /** The follow-ups' parents, in id order, once every follow-up has run. */
    function followUpExecutor(parents: string[]) {
      return defineExecutor<'etx.next', { parent: string }>({
        type: 'etx.next',
        mode: 'IMMEDIATE',
        execute({ parent }) {
          parents.push(parent);
        },
      });
    }

    const applyType = 'etx.apply';
    type Apply = TransactionalContext<{ n: number }, Tx>;

    /** A transactional executor: one effect row, one follow-up; then `after` (a failure, a wait). */
    function applyExecutor(
      after: (ctx: Apply) => Promise<void> | void = () => undefined,
      mode?: 'ASYNC_POOL',
    ) {
      return defineTransactionalExecutor<Tx>()<'etx.apply', { n: number }>({
        type: applyType,
        transactional: true,
        ...(mode === undefined ? {} : { mode }),
        async execute(_payload, ctx) {
          await effects.insert(ctx.tx, storeOf(ctx), ctx.id, ctx.attempt);
          await ctx.submit('etx.next', { parent: ctx.id });
          await after(ctx);
        },
      });
    }
    let currentStore: CommandStore<Tx> | null = null;
    const storeOf = (_ctx: Apply): CommandStore<Tx> => {
      if (currentStore === null) throw new Error('no store');
      return currentStore;
    };

    it('a drain: every command SUCCESS with exactly one effect row and one follow-up, submitted in its transaction', async () => {
      const parents: string[] = [];
      const { store, events, runtime } = await instance(
        [applyExecutor(undefined, 'ASYNC_POOL'), followUpExecutor(parents)],
        {
          sharedPool: { concurrency: 3 },
        },
      );
      currentStore = store;
      const n = 40;
      const ids = await runtime.client.transaction(async (tx) =>
        runtime.client.submitMany(
          tx,
          Array.from({ length: n }, (_, i) => ({ type: applyType, payload: { n: i } })),
        ),
      );
      await waitFor('every follow-up', () => parents.length === n);
      const done = await store.getMany(ids);
      expect(done.map((c) => c.status)).toEqual(Array(n).fill('SUCCESS'));
      const counts = await countEffects(store);
      expect([...counts.values()].every((c) => c === 1)).toBe(true);
      expect([...counts.keys()].sort()).toEqual([...ids].sort());
      expect([...parents].sort()).toEqual([...ids].sort());
      expect(kinds(events, 'fenced')).toEqual([]);
    });

    /** A transactional ASYNC_POOL executor: one effect row, then `then` with the payload's `n`. */
    function effectThen(then: (n: number, ctx: Apply) => Promise<void> | void) {
      return defineTransactionalExecutor<Tx>()<'etx.apply', { n: number }>({
        type: applyType,
        transactional: true,
        mode: 'ASYNC_POOL',
        async execute({ n }, ctx) {
          await effects.insert(ctx.tx, storeOf(ctx), ctx.id, ctx.attempt);
          await then(n, ctx);
        },
      });
    }

    /**
     * Commands 0…count-1 of `executors`' apply type, submitted before the runtime that runs them
     * starts (one slot, a queue of 20: its first claim queues them behind the slot), then that
     * runtime, with `options`.
     */
    async function queuedBehindOneSlot(
      executors: readonly AnyExecutor[],
      count: number,
      options: Partial<AsyncCommandsOptions<Tx>> = {},
    ) {
      const store = await openStore();
      currentStore = store;
      const { runtime: submitter } = await instance(executors, { store });
      await submitter.stop({ timeoutMs: 2_000, closeStore: false });
      const ids = await submitter.client.transaction(async (tx) =>
        submitter.client.submitMany(
          tx,
          Array.from({ length: count }, (_, n) => ({ type: applyType, payload: { n } })),
        ),
      );
      const { events } = await instance(executors, {
        store,
        sharedPool: { concurrency: 1, queueSize: 20 },
        ...options,
      });
      return { store, ids, events };
    }

    it('attempts waiting in the pool share one transaction, each undone alone: a throwing one leaves nothing, the others commit once', async () => {
      const parents: string[] = [];
      const failing = (n: number): boolean => n % 5 === 2;
      const executor = effectThen(async (n, ctx) => {
        await ctx.submit('etx.next', { parent: ctx.id });
        if (failing(n) && ctx.attempt === 1) throw new Error('fails after its writes');
      });
      const n = 60;
      const { store, ids, events } = await queuedBehindOneSlot([executor, followUpExecutor(parents)], n);
      await waitFor('every follow-up', () => parents.length === n, 30_000);
      const done = await store.getMany(ids);
      expect(done.map((c) => c.status)).toEqual(Array(n).fill('SUCCESS'));
      const failed = ids.filter((_, i) => failing(i));
      expect(
        done
          .filter((c) => c.retryCount === 1)
          .map((c) => c.id)
          .sort(),
      ).toEqual([...failed].sort());
      const counts = await countEffects(store);
      expect([...counts.keys()].sort()).toEqual([...ids].sort());
      expect([...counts.values()].every((c) => c === 1)).toBe(true);
      expect([...parents].sort()).toEqual([...ids].sort());
      expect((await store.list({ type: 'etx.next', limit: 500 })).items).toHaveLength(n);
      expect(kinds(events, 'retried')).toHaveLength(failed.length);
      expect(kinds(events, 'fenced')).toEqual([]);
    });

    it('an attempt of a shared transaction that catches a failed statement and returns fails alone where that dooms the transaction; the others commit once', async () => {
      const executor = effectThen(async (n, ctx) => {
        if (n === 1 && ctx.attempt === 1) await effects.fail(ctx.tx).catch(() => undefined);
      });
      const { store, ids } = await queuedBehindOneSlot([executor], 3);
      await waitFor('all three committed', async () =>
        (await store.getMany(ids)).every((c) => c.status === 'SUCCESS'),
      );
      const counts = await countEffects(store);
      expect(ids.map((id) => counts.get(id))).toEqual([1, 1, 1]);
      // PostgreSQL: the transaction refused everything after the failed statement, so the attempt
      // that caught it is undone to its savepoint and retried; elsewhere only that statement failed.
      expect((await store.getMany(ids)).map((c) => c.retryCount)).toEqual([
        0,
        features.abortsOnError ? 1 : 0,
        0,
      ]);
    });

    // Another connection's reads and writes wait for an open transaction where there is one writer.
    if (!features.oneWriter) {
      /** An executor whose command `at` (first attempt only) waits, inside its transaction, for `held`. */
      function holdingAt(at: number) {
        const running = gate();
        const held = gate();
        const started: number[] = [];
        const executor = effectThen(async (n, ctx) => {
          started.push(n);
          if (n === at && ctx.attempt === 1) {
            running.open();
            await held.promise;
          }
        });
        return { executor, running, held, started };
      }

      it('an attempt that joined a transaction commits with it: the first one’s row is not seen from outside until the second has returned', async () => {
        const { executor, running, held, started } = holdingAt(1);
        const { store, ids } = await queuedBehindOneSlot([executor], 2);
        await running.promise;
        // The first attempt returned and its successor runs in the same transaction: nothing of
        // either is committed yet.
        expect(started).toEqual([0, 1]);
        expect((await countEffects(store)).size).toBe(0);
        expect((await store.getMany(ids)).map((c) => c.status)).toEqual(['RUNNING', 'RUNNING']);
        held.open();
        await waitFor('both committed', async () =>
          (await store.getMany(ids)).every((c) => c.status === 'SUCCESS'),
        );
        const counts = await countEffects(store);
        expect(ids.map((id) => counts.get(id))).toEqual([1, 1]);
      });

      it('transactionGroupSize 1: an attempt never joins another’s transaction (its row is committed before the next one runs)', async () => {
        const { executor, running, held } = holdingAt(1);
        const { store, ids } = await queuedBehindOneSlot([executor], 2, { transactionGroupSize: 1 });
        await running.promise;
        expect((await store.get(ids[0]!))?.status).toBe('SUCCESS');
        expect((await countEffects(store)).get(ids[0]!)).toBe(1);
        held.open();
        await waitFor('the second committed', async () => (await store.get(ids[1]!))?.status === 'SUCCESS');
      });

      /** Command 0 takes 100 ms in its transaction, command 1 waits there for `held`. */
      function slowFirstThenHolding() {
        const running = gate();
        const held = gate();
        const executor = effectThen(async (n, ctx) => {
          if (n === 0 && ctx.attempt === 1) await new Promise((r) => setTimeout(r, 100));
          if (n === 1 && ctx.attempt === 1) {
            running.open();
            await held.promise;
          }
        });
        return { executor, running, held };
      }

      it('a transaction open longer than transactionGroupMs (default 20 ms) takes no further attempt: the first one commits before the next runs', async () => {
        const { executor, running, held } = slowFirstThenHolding();
        const { store, ids } = await queuedBehindOneSlot([executor], 2);
        await running.promise;
        expect((await store.get(ids[0]!))?.status).toBe('SUCCESS');
        expect((await countEffects(store)).get(ids[0]!)).toBe(1);
        held.open();
        await waitFor('the second committed', async () => (await store.get(ids[1]!))?.status === 'SUCCESS');
      });

      it('a longer transactionGroupMs lets an attempt join the transaction of a slow first one: neither is seen until both have run', async () => {
        const { executor, running, held } = slowFirstThenHolding();
        const { store, ids } = await queuedBehindOneSlot([executor], 2, { transactionGroupMs: 1_000 });
        await running.promise;
        expect((await store.getMany(ids)).map((c) => c.status)).toEqual(['RUNNING', 'RUNNING']);
        expect((await countEffects(store)).size).toBe(0);
        held.open();
        await waitFor('both committed', async () =>
          (await store.getMany(ids)).every((c) => c.status === 'SUCCESS'),
        );
        const counts = await countEffects(store);
        expect(ids.map((id) => counts.get(id))).toEqual([1, 1]);
      });

      it('an attempt of a shared transaction whose claim was taken away is undone with those after it: each command still commits exactly once', async () => {
        const { executor, running, held } = holdingAt(2);
        const { store, ids, events } = await queuedBehindOneSlot([executor], 3);
        await running.promise;
        // The second attempt has returned and waits for the shared COMMIT: its claim goes.
        expect(E.isRight(await store.requeue(ids[1]!, new Date()))).toBe(true);
        held.open();
        await waitFor('all three committed', async () =>
          (await store.getMany(ids)).every((c) => c.status === 'SUCCESS'),
        );
        const counts = await countEffects(store);
        expect(ids.map((id) => counts.get(id))).toEqual([1, 1, 1]);
        expect(kinds(events, 'fenced').map((e) => (e as { command?: { id: string } }).command?.id)).toEqual([
          ids[1],
        ]);
        // The third ran again: released uncounted, not failed.
        expect((await store.get(ids[2]!))?.retryCount).toBe(0);
        expect(kinds(events, 'retried')).toEqual([]);
      });
    }

    it('reports progress from inside its transaction: the last report is stored with the SUCCESS, never waited for by it', async () => {
      const parents: string[] = [];
      const paused = gate();
      const pause = gate();
      const { store, runtime } = await instance([
        applyExecutor(async (ctx) => {
          ctx.progress({ done: 1, total: 4 });
          // Long enough for the throttled write of the first report to be under way.
          await new Promise((r) => setTimeout(r, 50));
          ctx.progress({ done: 2, total: 4 });
          paused.open();
          await pause.promise;
          ctx.progress({ done: 3, total: 4 });
          ctx.progress({ done: 4, total: 4 });
        }),
        followUpExecutor(parents),
      ]);
      currentStore = store;
      const id = await runtime.client.transaction((_tx, submit) => submit(applyType, { n: 1 }));
      // Nothing read from the store meanwhile: on SQLite a read waits for the attempt's transaction.
      await paused.promise;
      pause.open();
      await waitFor('the follow-up', () => parents.length === 1);
      expect(await store.get(id)).toMatchObject({ status: 'SUCCESS', progress: { done: 4, total: 4 } });
    });

    it('a throwing executor leaves no effect and no follow-up; its retry commits exactly one of each', async () => {
      const parents: string[] = [];
      const { store, runtime, events } = await instance([
        applyExecutor((ctx) => {
          if (ctx.attempt === 1) throw new Error('the first attempt fails after its writes');
        }),
        followUpExecutor(parents),
      ]);
      currentStore = store;
      const id = await runtime.client.transaction((_tx, submit) => submit(applyType, { n: 1 }));
      await waitFor('the follow-up of the retry', () => parents.length === 1);
      const done = await store.get(id);
      expect(done?.status).toBe('SUCCESS');
      expect(done?.retryCount).toBe(1);
      expect((await countEffects(store)).get(id)).toBe(1);
      expect(kinds(events, 'retried')).toHaveLength(1);
      expect((await store.list({ type: 'etx.next' })).items).toHaveLength(1);
    });

    /** The follow-ups of `parent` each ctx submit below writes: two of submitMany, one idempotent, two workflow steps. */
    const FOLLOW_UPS = 5;
    const followUpsOf = async (store: CommandStore<Tx>, parent: string) =>
      (await store.list({ type: 'etx.next' })).items.filter(
        (c) => (c.payload as { parent?: unknown }).parent === parent,
      );

    /**
     * A transactional executor that, after its effect row, submits with every submit of its
     * context: submitMany (two), submitIdempotent (one, keyed by its own id: what each attempt was
     * answered is kept) and a workflow of two steps, the second waiting for the first. `before` runs
     * first, `after` last.
     */
    function fanOutExecutor(
      answers: { duplicate: boolean }[],
      hooks: { before?: (ctx: Apply) => Promise<void>; after?: (ctx: Apply) => Promise<void> | void },
    ) {
      return defineTransactionalExecutor<Tx>()<'etx.apply', { n: number }>({
        type: applyType,
        transactional: true,
        async execute(_payload, ctx) {
          await hooks.before?.(ctx);
          await effects.insert(ctx.tx, storeOf(ctx), ctx.id, ctx.attempt);
          const parent = { parent: ctx.id };
          await ctx.submitMany([
            { type: 'etx.next', payload: parent },
            { type: 'etx.next', payload: parent },
          ]);
          const { duplicate } = await ctx.submitIdempotent('etx.next', `once-${ctx.id}`, parent);
          answers.push({ duplicate });
          await ctx
            .workflow(`wf-${ctx.id}`)
            .step('first', 'etx.next', parent)
            .step('second', 'etx.next', parent, { dependsOn: ['first'] })
            .submit();
          await hooks.after?.(ctx);
        },
      });
    }

    /** `id` SUCCESS with one effect row, and each of its follow-ups committed and run exactly once. */
    async function expectOneSetOfFollowUps(store: CommandStore<Tx>, id: string, parents: string[]) {
      // The executor runs before its SUCCESS is written: wait for the rows, not for the runs.
      await waitFor('every follow-up SUCCESS', async () => {
        const rows = await followUpsOf(store, id);
        return rows.length >= FOLLOW_UPS && rows.every((c) => c.status === 'SUCCESS');
      });
      expect((await store.get(id))?.status).toBe('SUCCESS');
      expect(await followUpsOf(store, id)).toHaveLength(FOLLOW_UPS);
      const workflow = await workflowStatus(store, `wf-${id}`);
      expect(workflow?.steps.map((s) => [s.name, s.status])).toEqual([
        ['first', 'SUCCESS'],
        ['second', 'SUCCESS'],
      ]);
      expect((await countEffects(store)).get(id)).toBe(1);
      expect(parents.filter((p) => p === id)).toHaveLength(FOLLOW_UPS);
    }

    it('ctx.submitMany, ctx.submitIdempotent and ctx.workflow in an attempt that throws: none of its follow-ups exists; the retry commits each exactly once', async () => {
      const parents: string[] = [];
      const answers: { duplicate: boolean }[] = [];
      const retry = gate();
      let retrying = false;
      // Opened first: on SQLite a store's migration waits for the write lock the retry holds.
      const admin = await openStore();
      const { store, runtime } = await instance([
        fanOutExecutor(answers, {
          async before(ctx) {
            if (ctx.attempt !== 2) return;
            retrying = true;
            await retry.promise;
          },
          after(ctx) {
            if (ctx.attempt === 1) throw new Error('the first attempt fails after its submits');
          },
        }),
        followUpExecutor(parents),
      ]);
      currentStore = store;
      const id = await runtime.client.transaction((_tx, submit) => submit(applyType, { n: 1 }));
      await waitFor('the retry', () => retrying);
      // The first attempt is over and rolled back: read from another connection, nothing of it is there.
      expect(await followUpsOf(admin, id)).toEqual([]);
      expect(await workflowStatus(admin, `wf-${id}`)).toBeNull();
      retry.open();
      await expectOneSetOfFollowUps(store, id, parents);
      // The retry's idempotent submit found no holder: the first attempt's never committed.
      expect(answers).toEqual([{ duplicate: false }, { duplicate: false }]);
      expect((await store.get(id))?.retryCount).toBe(1);
    });

    it('an attempt past its timeout is rolled back: no effect from it, and its retry commits once', async () => {
      const parents: string[] = [];
      const slow = defineTransactionalExecutor<Tx>()<'etx.apply', { n: number }>({
        type: applyType,
        transactional: true,
        timeoutMs: 150,
        async execute(_payload, ctx) {
          await effects.insert(ctx.tx, storeOf(ctx), ctx.id, ctx.attempt);
          await ctx.submit('etx.next', { parent: ctx.id });
          // The first attempt ignores its signal and outlives its timeout.
          if (ctx.attempt === 1) await new Promise((r) => setTimeout(r, 400));
        },
      });
      const { runtime, store } = await instance([slow, followUpExecutor(parents)]);
      currentStore = store;
      const id = await runtime.client.transaction((_tx, submit) => submit(applyType, { n: 1 }));
      await waitFor('the follow-up of the retry', () => parents.length === 1);
      await new Promise((r) => setTimeout(r, 500)); // the first attempt's late writes, refused
      expect((await store.get(id))?.status).toBe('SUCCESS');
      expect((await countEffects(store)).get(id)).toBe(1);
      expect((await store.list({ type: 'etx.next' })).items).toHaveLength(1);
    });

    it('ctx.tx and ctx.submit used after the executor returned throw TRANSACTION_CLOSED', async () => {
      let kept: Apply | null = null;
      let handle: Tx | null = null;
      const { store, runtime } = await instance([
        applyExecutor((ctx) => {
          kept = ctx;
          handle = ctx.tx;
        }),
        followUpExecutor([]),
      ]);
      currentStore = store;
      const id = await runtime.client.transaction((_tx, submit) => submit(applyType, { n: 1 }));
      await waitFor('SUCCESS', async () => (await store.get(id))?.status === 'SUCCESS');
      const ctx = kept as Apply | null;
      expect(ctx).not.toBeNull();
      expect(() => ctx!.tx).toThrow(expect.objectContaining({ code: 'TRANSACTION_CLOSED' }));
      await expect(ctx!.submit('etx.next', { parent: 'late' })).rejects.toMatchObject({
        code: 'TRANSACTION_CLOSED',
      });
      // The handle itself: any property read or call on it is refused.
      const late = handle as unknown as Record<string, unknown>;
      expect(() => late['query'] ?? late['prepare']).toThrow(
        expect.objectContaining({ code: 'TRANSACTION_CLOSED' }),
      );
      expect((await countEffects(store)).get(id)).toBe(1);
    });

    it('an attempt that runs for several leases keeps its claim: heartbeats go on while its transaction is open, a second instance reclaims nothing', async () => {
      const parents: string[] = [];
      const { store, runtime, events } = await instance(
        [
          applyExecutor(async () => {
            await new Promise((r) => setTimeout(r, 1_500));
          }),
          followUpExecutor(parents),
        ],
        { leaseMs: 400, reclaimIntervalMs: 50 },
      );
      currentStore = store;
      // Another instance reclaiming hung work on its own connections meanwhile.
      const peer = await instance([followUpExecutor([])], { reclaimIntervalMs: 50 });
      const id = await runtime.client.transaction((_tx, submit) => submit(applyType, { n: 1 }));
      await waitFor('SUCCESS', async () => (await store.get(id))?.status === 'SUCCESS');
      const done = await store.get(id);
      expect(done?.rescueCount).toBe(0);
      expect(done?.retryCount).toBe(0);
      expect([...kinds(events, 'fenced'), ...kinds(peer.events, 'reclaimed')]).toEqual([]);
      expect((await countEffects(store)).get(id)).toBe(1);
    });

    /**
     * The store with its next transaction after `arm()` made to fail as a connection lost during
     * COMMIT would: 'committed' commits it and then throws (the answer lost), 'rolled-back' rolls
     * it back after the callback (the completion included) and throws.
     */
    function lossyCommit(store: CommandStore<Tx>) {
      let armed: 'committed' | 'rolled-back' | null = null;
      const lost = () =>
        Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
      const wrapped = new Proxy(store, {
        get(target, prop) {
          if (prop === 'transaction') {
            return async <T>(fn: (tx: Tx) => Promise<T>): Promise<T> => {
              const fault = armed;
              armed = null;
              if (fault === null) return target.transaction(fn);
              if (fault === 'committed') {
                await target.transaction(fn);
                throw lost();
              }
              await target.transaction(async (tx) => {
                await fn(tx);
                throw lost();
              });
              throw new Error('unreachable');
            };
          }
          const value = Reflect.get(target, prop, target) as unknown;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      });
      return { store: wrapped, arm: (fault: 'committed' | 'rolled-back') => (armed = fault) };
    }

    it('a COMMIT whose answer was lost but that landed is settled from the row: SUCCESS once, its follow-up dispatched, nothing retried', async () => {
      const parents: string[] = [];
      const real = await openStore();
      const lossy = lossyCommit(real);
      const { runtime, events } = await instance([applyExecutor(), followUpExecutor(parents)], {
        store: lossy.store,
        leaseMs: 1_000,
      });
      currentStore = real;
      const id = await runtime.client.transaction((_tx, submit) => submit(applyType, { n: 1 }));
      lossy.arm('committed');
      // Where the store claims the first IMMEDIATE follow-up with the COMMIT, that claim's answer
      // was lost too: the follow-up runs once its lease has run out (reclaimed), else at once.
      await waitFor('the follow-up', () => parents.length === 1);
      await waitFor('the success event', () =>
        kinds(events, 'succeeded').some((e) => 'command' in e && e.command.id === id),
      );
      const done = await real.get(id);
      expect(done?.status).toBe('SUCCESS');
      expect(done?.retryCount).toBe(0);
      expect(kinds(events, 'retried')).toEqual([]);
      expect((await countEffects(real)).get(id)).toBe(1);
      expect((await real.list({ type: 'etx.next' })).items).toHaveLength(1);
    });

    it('a COMMIT whose answer was lost and that did not land is settled from the row: put back uncounted where a connection was lost, run again and committed once', async () => {
      const parents: string[] = [];
      const real = await openStore();
      const lossy = lossyCommit(real);
      const { runtime, events } = await instance([applyExecutor(), followUpExecutor(parents)], {
        store: lossy.store,
      });
      currentStore = real;
      const id = await runtime.client.transaction((_tx, submit) => submit(applyType, { n: 1 }));
      lossy.arm('rolled-back');
      await waitFor('the follow-up of the retry', () => parents.length === 1);
      const done = await real.get(id);
      expect(done?.status).toBe('SUCCESS');
      if (features.connections) {
        // A lost connection is no failure of the attempt's: nothing counted, no backoff.
        expect(done?.retryCount).toBe(0);
        expect(kinds(events, 'retried')).toEqual([]);
        expect(kinds(events, 'released').map((e) => 'id' in e && e.id)).toEqual([id]);
      } else {
        // Embedded SQLite has no connection to lose: whatever failed is the attempt's, counted.
        expect(done?.retryCount).toBe(1);
        expect(kinds(events, 'retried')).toHaveLength(1);
      }
      expect((await countEffects(real)).get(id)).toBe(1);
      expect((await real.list({ type: 'etx.next' })).items).toHaveLength(1);
    });

    if (!features.oneWriter) {
      it('a claim requeued while the executor waits: the stale attempt leaves no effect and no follow-up; the next one commits once', async () => {
        const parents: string[] = [];
        const release = gate();
        let firstStarted = false;
        const { store, runtime, events } = await instance([
          applyExecutor(async (ctx) => {
            if (ctx.attempt === 1 && !firstStarted) {
              firstStarted = true;
              await release.promise; // ignores its signal: returns only when let go
            }
          }),
          followUpExecutor(parents),
        ]);
        currentStore = store;
        const id = await runtime.client.transaction((_tx, submit) => submit(applyType, { n: 1 }));
        await waitFor('the first attempt waiting', () => firstStarted);
        const admin = await openStore();
        const requeued = await admin.requeue(id, new Date());
        expect(requeued._tag).toBe('Right');
        release.open();
        await waitFor('the follow-up of the next attempt', () => parents.length === 1);
        await waitFor('SUCCESS', async () => (await store.get(id))?.status === 'SUCCESS');
        expect(kinds(events, 'fenced')).toHaveLength(1);
        expect((await countEffects(store)).get(id)).toBe(1);
        expect((await store.list({ type: 'etx.next' })).items).toHaveLength(1);
        expect((await store.get(id))?.history.map((a) => a.outcome)).toContain('requeued');
      });

      it('ctx.submitMany, ctx.submitIdempotent and ctx.workflow in an attempt fenced out by a requeue: none of its follow-ups exists; the next attempt commits each exactly once', async () => {
        const parents: string[] = [];
        const answers: { duplicate: boolean }[] = [];
        const release = gate();
        let firstStarted = false;
        const admin = await openStore();
        const { store, runtime, events } = await instance([
          fanOutExecutor(answers, {
            async after() {
              if (firstStarted) return;
              firstStarted = true;
              await release.promise; // ignores its signal: returns only when let go
            },
          }),
          followUpExecutor(parents),
        ]);
        currentStore = store;
        const id = await runtime.client.transaction((_tx, submit) => submit(applyType, { n: 1 }));
        await waitFor('the first attempt, its submits made', () => firstStarted);
        expect((await admin.requeue(id, new Date()))._tag).toBe('Right');
        // Its transaction is open or already rolled back: either way nothing of it is visible.
        expect(await followUpsOf(admin, id)).toEqual([]);
        expect(await workflowStatus(admin, `wf-${id}`)).toBeNull();
        release.open();
        await expectOneSetOfFollowUps(store, id, parents);
        expect(kinds(events, 'fenced')).toHaveLength(1);
        expect(answers).toEqual([{ duplicate: false }, { duplicate: false }]);
      });
    } else {
      it('transactional attempts run one at a time, even in a pool with several slots', async () => {
        const parents: string[] = [];
        let running = 0;
        let most = 0;
        const { store, runtime } = await instance(
          [
            applyExecutor(async () => {
              most = Math.max(most, ++running);
              await new Promise((r) => setTimeout(r, 30));
              running--;
            }, 'ASYNC_POOL'),
            followUpExecutor(parents),
          ],
          { sharedPool: { concurrency: 3 } },
        );
        currentStore = store;
        const n = 6;
        await runtime.client.transaction(async (tx) =>
          runtime.client.submitMany(
            tx,
            Array.from({ length: n }, (_, i) => ({ type: applyType, payload: { n: i } })),
          ),
        );
        await waitFor('every follow-up', () => parents.length === n);
        expect(most).toBe(1);
      });

      it('another connection cannot take the claim while the transaction is open: a requeue waits for the COMMIT and is refused', async () => {
        const parents: string[] = [];
        const release = gate();
        let started = false;
        const { store, runtime } = await instance([
          applyExecutor(async () => {
            started = true;
            await release.promise;
          }),
          followUpExecutor(parents),
        ]);
        currentStore = store;
        const admin = await openStore();
        const id = await runtime.client.transaction((_tx, submit) => submit(applyType, { n: 1 }));
        await waitFor('the attempt waiting', () => started);
        const requeue = admin.requeue(id, new Date());
        await new Promise((r) => setTimeout(r, 200));
        release.open();
        const requeued = await requeue;
        expect(requeued._tag).toBe('Left');
        await waitFor('the follow-up', () => parents.length === 1);
        expect((await store.get(id))?.status).toBe('SUCCESS');
        expect((await countEffects(store)).get(id)).toBe(1);
      });
    }
  });
}
