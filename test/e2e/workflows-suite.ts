import { afterEach, describe, expect, it } from 'vitest';
import { immediateBackoff, type CommandStore, type DependencyOutcome } from '@asynccmd/core';
import {
  cancelWorkflow,
  createAsyncCommands,
  defineExecutor,
  workflowStatus,
  type AnyExecutor,
} from '@asynccmd/runtime';
import type { RuntimeHarness, RuntimeHarnessFactory } from './harness.js';

async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 15_000) {
  const until = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** `store` with each reportProgress call counted. */
function countingProgress<Tx>(store: CommandStore<Tx>, counted: () => void): CommandStore<Tx> {
  return new Proxy(store, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target);
      if (key !== 'reportProgress' || typeof value !== 'function') {
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      }
      return (...args: unknown[]): unknown => {
        counted();
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/**
 * Workflows end to end: the client's builder, a real runtime draining the steps, results flowing
 * forward through ctx.dependencies(), a batch callback, failure propagation and cancellation.
 */
export function describeWorkflowsE2E<Tx>(name: string, harnessFactory: RuntimeHarnessFactory<Tx>): void {
  describe(`workflows on ${name}`, () => {
    let harness: RuntimeHarness<Tx> | null = null;
    const cleanups: (() => Promise<void>)[] = [];
    let seq = 0;

    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
      await harness?.dispose();
      harness = null;
    });

    async function instance(
      executors: readonly AnyExecutor[],
      start = true,
      wrap: (store: CommandStore<Tx>) => CommandStore<Tx> = (store) => store,
      pollIntervalMs = 20,
    ) {
      harness ??= await harnessFactory(`ewf_${process.pid}_${++seq}_${Math.floor(Math.random() * 1e6)}`);
      const store: CommandStore<Tx> = await harness.openStore();
      const runtime = createAsyncCommands<readonly AnyExecutor[], Tx>({
        pollIntervalMs,
        backoff: immediateBackoff,
        store: wrap(store),
        executors,
      });
      cleanups.push(() => runtime.stop({ timeoutMs: 2_000, closeStore: false }));
      if (start) runtime.start();
      return { runtime, store };
    }

    it('a diamond runs each step after its dependencies, and the last step reads their results', async () => {
      const ran: string[] = [];
      let seen: readonly DependencyOutcome[] = [];
      const step = (type: string) =>
        defineExecutor<string, { order: string }>({
          type,
          async execute({ order }, ctx) {
            ran.push(type);
            ctx.setResult({ step: type, order });
            if (type === 'wf.ship') seen = await ctx.dependencies();
          },
        });
      const { runtime, store } = await instance([
        step('wf.charge'),
        step('wf.reserve'),
        step('wf.notify'),
        step('wf.ship'),
      ]);
      const submitted = await runtime.client
        .workflow(`order-${seq}`)
        .step('charge', 'wf.charge', { order: 'o-1' })
        .step('reserve', 'wf.reserve', { order: 'o-1' }, { dependsOn: ['charge'] })
        .step('notify', 'wf.notify', { order: 'o-1' }, { dependsOn: ['charge'] })
        .step('ship', 'wf.ship', { order: 'o-1' }, { dependsOn: ['reserve', 'notify'] })
        .submit();
      expect(Object.keys(submitted.steps)).toEqual(['charge', 'reserve', 'notify', 'ship']);
      await waitFor(
        'the workflow',
        async () => (await workflowStatus(store, submitted.id))?.state === 'completed',
      );
      expect(ran[0]).toBe('wf.charge');
      expect(ran[3]).toBe('wf.ship');
      expect(new Set(ran.slice(1, 3))).toEqual(new Set(['wf.reserve', 'wf.notify']));
      expect(seen.map((d) => [d.id, d.status, d.result])).toEqual(
        [
          [submitted.steps.reserve, 'SUCCESS', { step: 'wf.reserve', order: 'o-1' }],
          [submitted.steps.notify, 'SUCCESS', { step: 'wf.notify', order: 'o-1' }],
        ].sort((a, b) => Number(a[0]) - Number(b[0])),
      );
      const status = await workflowStatus(store, submitted.id);
      expect(status?.progress).toEqual({ done: 4, total: 4, fraction: 1 });
      expect(status?.steps.find((s) => s.name === 'ship')?.dependsOn).toEqual(
        [
          { step: 'reserve', id: submitted.steps.reserve, onFailure: 'cancel' },
          { step: 'notify', id: submitted.steps.notify, onFailure: 'cancel' },
        ].sort((a, b) => Number(a.id) - Number(b.id)),
      );
      expect(status?.steps.map((s) => [s.name, s.status])).toEqual([
        ['charge', 'SUCCESS'],
        ['reserve', 'SUCCESS'],
        ['notify', 'SUCCESS'],
        ['ship', 'SUCCESS'],
      ]);
    });

    it('a 1,000-step diamond drained by two instances: every step once, none before its dependencies, the tail once', async () => {
      const runs = new Map<string, number>();
      const violations: string[] = [];
      const step = defineExecutor<'wf.diamond', { step: string }>({
        type: 'wf.diamond',
        async execute({ step: name }, ctx) {
          for (const d of await ctx.dependencies()) {
            if (d.status !== 'SUCCESS') violations.push(`${name} ran while ${d.id} was ${d.status}`);
          }
          runs.set(name, (runs.get(name) ?? 0) + 1);
        },
      });
      const first = await instance([step]);
      const second = await instance([step]);
      let builder = first.runtime.client
        .workflow(`diamond-${seq}`)
        .step('root', 'wf.diamond', { step: 'root' });
      const middle = Array.from({ length: 998 }, (_, i) => `m${i}`);
      for (const name of middle)
        builder = builder.step(name, 'wf.diamond', { step: name }, { dependsOn: ['root'] });
      const submitted = await builder
        .step('tail', 'wf.diamond', { step: 'tail' }, { dependsOn: middle })
        .submit();
      await waitFor(
        'the tail',
        async () => (await first.store.get(submitted.steps.tail!))?.status === 'SUCCESS',
        60_000,
      );
      expect(violations).toEqual([]);
      expect(runs.size).toBe(1_000);
      expect([...runs.values()].every((n) => n === 1)).toBe(true);
      expect((await workflowStatus(second.store, submitted.id))?.progress).toEqual({
        done: 1_000,
        total: 1_000,
        fraction: 1,
      });
    }, 90_000);

    it("a step reports progress: read in flight in the workflow's one figure, throttled, the last report stored with its SUCCESS", async () => {
      let release = (): void => undefined;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const importing = defineExecutor<'wf.import', { rows: number }>({
        type: 'wf.import',
        async execute({ rows }, ctx) {
          ctx.progress({ done: rows / 2, total: rows });
          await gate;
          for (let done = rows / 2; done <= rows; done++) ctx.progress({ done, total: rows });
        },
      });
      const report = defineExecutor<'wf.report', object>({ type: 'wf.report', execute: () => undefined });
      let writes = 0;
      const { runtime, store } = await instance([importing, report], true, (s) =>
        countingProgress(s, () => (writes += 1)),
      );
      const submitted = await runtime.client
        .workflow(`import-${seq}`)
        .step('import', 'wf.import', { rows: 100 })
        .step('report', 'wf.report', {}, { dependsOn: ['import'] })
        .submit();
      await waitFor(
        'the first report',
        async () => (await store.get(submitted.steps.import!))?.progress?.done === 50,
      );
      const during = await workflowStatus(store, submitted.id);
      expect(during?.state).toBe('processing');
      // Half of one of two steps.
      expect(during?.progress).toEqual({ done: 0, total: 2, fraction: 0.25 });
      expect(during?.steps.map((s) => s.progress)).toEqual([{ done: 50, total: 100 }, null]);
      release();
      await waitFor(
        'the workflow',
        async () => (await workflowStatus(store, submitted.id))?.state === 'completed',
      );
      expect((await store.get(submitted.steps.import!))?.progress).toEqual({ done: 100, total: 100 });
      // 52 reports: the first at once, the rest coalesced (the last before the SUCCESS), and at
      // most one more if the second's interval passed while the step waited at its gate.
      expect(writes).toBeGreaterThanOrEqual(2);
      expect(writes).toBeLessThanOrEqual(3);
      expect((await workflowStatus(store, submitted.id))?.progress).toEqual({
        done: 2,
        total: 2,
        fraction: 1,
      });
    });

    it('a command submitted with dependsOn waits for those commands, by id, with the failure rule of each', async () => {
      const ran: string[] = [];
      let seen: readonly DependencyOutcome[] = [];
      const first = defineExecutor<'wf.first', object>({ type: 'wf.first', execute: () => undefined });
      const then = defineExecutor<'wf.then', { name: string }>({
        type: 'wf.then',
        async execute({ name }, ctx) {
          ran.push(name);
          if (name === 'then') seen = await ctx.dependencies();
        },
      });
      const failing = defineExecutor<'wf.fails', object>({
        type: 'wf.fails',
        maxRetry: 0,
        execute() {
          throw new Error('no');
        },
      });
      const { runtime, store } = await instance([first, then, failing], false);
      const { client } = runtime;
      const [a, b] = await client.transaction(async (_tx, submit) => [
        await submit('wf.first', {}),
        await submit('wf.first', {}),
      ]);
      const dependant = await client.transaction((_tx, submit) =>
        submit('wf.then', { name: 'then' }, { dependsOn: [a, { id: b, onFailure: 'cancel' }] }),
      );
      expect((await store.get(dependant))?.status).toBe('WAITING');
      const fails = await client.transaction((tx) => client.submit(tx, 'wf.fails', {}));
      const cancelled = await client.transaction((tx) =>
        client.submit(tx, 'wf.then', { name: 'cancelled' }, { dependsOn: [fails] }),
      );
      const anyway = await client.transaction((tx) =>
        client.submit(
          tx,
          'wf.then',
          { name: 'anyway' },
          { dependsOn: [{ id: fails, onFailure: 'continue' }] },
        ),
      );
      // An empty list is an ordinary submit.
      const plain = await client.transaction((tx) =>
        client.submit(tx, 'wf.then', { name: 'plain' }, { dependsOn: [] }),
      );
      expect((await store.get(plain))?.status).toBe('PENDING');
      runtime.start();
      await waitFor('the dependants', async () => {
        const rows = await store.getMany([dependant, cancelled, anyway]);
        return rows.every((r) => r.status === 'SUCCESS' || r.status === 'CANCELLED');
      });
      expect((await store.get(dependant))?.status).toBe('SUCCESS');
      expect(seen.map((d) => [d.id, d.status])).toEqual(
        [
          [a, 'SUCCESS'],
          [b, 'SUCCESS'],
        ].sort((x, y) => Number(x[0]) - Number(y[0])),
      );
      expect((await store.get(cancelled))?.status).toBe('CANCELLED');
      expect((await store.get(anyway))?.status).toBe('SUCCESS');
      expect(ran).not.toContain('cancelled');

      // Refused before anything is written: a rollback, a missing dependency, bad input.
      const before = (await store.list({ type: 'wf.then', limit: 100 })).items.length;
      await expect(
        client.transaction(async (_tx, submit) => {
          await submit('wf.then', { name: 'rolled back' }, { dependsOn: [a] });
          throw new Error('the business write failed');
        }),
      ).rejects.toThrow('the business write failed');
      const refused = async (dependsOn: unknown): Promise<string | undefined> => {
        try {
          await client.transaction((tx) =>
            client.submit(tx, 'wf.then', { name: 'bad' }, { dependsOn } as { dependsOn: string[] }),
          );
          return 'accepted';
        } catch (e) {
          return (e as { code?: string }).code;
        }
      };
      expect(await refused(['9223372036854775807'])).toBe('NOT_FOUND');
      expect(await refused('1')).toBe('INVALID_ARGUMENT');
      expect(await refused([a, a])).toBe('INVALID_ARGUMENT');
      expect(await refused([{ id: a, onFailure: 'maybe' }])).toBe('INVALID_ARGUMENT');
      expect(await refused([{ id: a, after: 'x' }])).toBe('INVALID_ARGUMENT');
      expect(await refused([7])).toBe('INVALID_ARGUMENT');
      expect((await store.list({ type: 'wf.then', limit: 100 })).items).toHaveLength(before);
    });

    it('a released step starts at once in the instance that ended its dependency, not at its next poll', async () => {
      const ran: string[] = [];
      // The default mode (SCHEDULED), and a member that goes DEAD releasing a callback ('continue').
      const step = defineExecutor<'wf.chain', { step: string }>({
        type: 'wf.chain',
        maxRetry: 0,
        execute({ step: name }) {
          ran.push(name);
          if (name === 'fails') throw new Error('this member fails');
        },
      });
      // Polls once a minute: within the test only a wake-up can start a released step.
      const { runtime, store } = await instance([step], true, undefined, 60_000);
      const chain = ['a', 'b', 'c', 'd', 'e'];
      let builder = runtime.client.workflow(`chain-${seq}`);
      chain.forEach((name, i) => {
        builder = builder.step(
          name,
          'wf.chain',
          { step: name },
          i === 0 ? {} : { dependsOn: [chain[i - 1]!] },
        );
      });
      const submitted = await builder
        .step('fails', 'wf.chain', { step: 'fails' }, { dependsOn: ['e'] })
        .step(
          'after',
          'wf.chain',
          { step: 'after' },
          { dependsOn: [{ step: 'fails', onFailure: 'continue' }] },
        )
        .submit();
      await waitFor(
        'the step after the dead one',
        async () => (await store.get(submitted.steps.after!))?.status === 'SUCCESS',
      );
      expect(ran).toEqual([...chain, 'fails', 'after']);
    });

    it("a workflow submitted in the caller's transaction does not exist after its rollback", async () => {
      const noop = defineExecutor<'wf.noop', object>({ type: 'wf.noop', execute: () => undefined });
      const { runtime, store } = await instance([noop], false);
      await expect(
        runtime.client.transaction(async (tx) => {
          await runtime.client
            .workflow('rolled-back')
            .step('a', 'wf.noop', {})
            .step('b', 'wf.noop', {}, { dependsOn: ['a'] })
            .submitInTx(tx);
          throw new Error('the business write failed');
        }),
      ).rejects.toThrow('the business write failed');
      expect(await workflowStatus(store, 'rolled-back')).toBeNull();
      expect((await store.list({ type: 'wf.noop' })).items).toEqual([]);
      // A cycle is refused before anything is written.
      expect(() =>
        runtime.client
          .workflow('cyclic')
          .step('a', 'wf.noop', {}, { dependsOn: ['b'] })
          .step('b', 'wf.noop', {}, { dependsOn: ['a'] })
          .submit(),
      ).toThrow(/cycle/);
      expect((await store.list({ type: 'wf.noop' })).items).toEqual([]);
    });

    it('a batch callback runs once, after every member ended, and counts how each ended', async () => {
      const counts: Record<string, number>[] = [];
      const member = defineExecutor<'wf.member', { fail: boolean }>({
        type: 'wf.member',
        maxRetry: 0,
        execute({ fail }) {
          if (fail) throw new Error('this member fails');
        },
      });
      const callback = defineExecutor<'wf.done', object>({
        type: 'wf.done',
        async execute(_payload, ctx) {
          const outcomes = await ctx.dependencies();
          const byStatus: Record<string, number> = {};
          for (const d of outcomes) byStatus[d.status] = (byStatus[d.status] ?? 0) + 1;
          counts.push(byStatus);
        },
      });
      const { runtime, store } = await instance([member, callback]);
      let builder = runtime.client.workflow(`batch-${seq}`);
      const members = Array.from({ length: 20 }, (_, i) => `m${i}`);
      members.forEach((m, i) => (builder = builder.step(m, 'wf.member', { fail: i % 5 === 0 })));
      const submitted = await builder
        .step('done', 'wf.done', {}, { dependsOn: members.map((step) => ({ step, onFailure: 'continue' })) })
        .submit();
      await waitFor(
        'the callback',
        async () => (await store.get(submitted.steps.done!))?.status === 'SUCCESS',
      );
      expect(counts).toEqual([{ SUCCESS: 16, DEAD: 4 }]);
      expect((await workflowStatus(store, submitted.id))?.state).toBe('follow_up_failed');
    });

    it('a step that goes DEAD cancels what depends on it; cancelling a workflow cancels what has not started', async () => {
      const failing = defineExecutor<'wf.fails', object>({
        type: 'wf.fails',
        maxRetry: 0,
        execute() {
          throw new Error('no');
        },
      });
      const later = defineExecutor<'wf.later', object>({ type: 'wf.later', execute: () => undefined });
      const { runtime, store } = await instance([failing, later]);
      const broken = await runtime.client
        .workflow(`broken-${seq}`)
        .step('first', 'wf.fails', {})
        .step('second', 'wf.later', {}, { dependsOn: ['first'] })
        .step('third', 'wf.later', {}, { dependsOn: ['second'] })
        .submit();
      await waitFor(
        'the cascade',
        async () => (await store.get(broken.steps.third!))?.status === 'CANCELLED',
      );
      expect((await store.get(broken.steps.second!))?.status).toBe('CANCELLED');
      await runtime.stop({ timeoutMs: 2_000, closeStore: false });
      const waiting = await runtime.client
        .workflow(`cancelled-${seq}`)
        .step('a', 'wf.later', {})
        .step('b', 'wf.later', {}, { dependsOn: ['a'] })
        .submit();
      expect((await cancelWorkflow(store, waiting.id)).sort()).toEqual(
        [waiting.steps.a, waiting.steps.b].sort(),
      );
      expect((await workflowStatus(store, waiting.id))?.state).toBe('cancelled');
    });
  });
}
