import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { CommandEvent, CommandStore } from '@asynccmd/core';
import { Container, inject, injectable } from 'inversify';
import { asyncCommandModule, AsyncCommandTokens } from '@asynccmd/runtime/inversify';
import {
  createAsyncCommands,
  type AsyncCommandClient,
  type AsyncCommands,
  type CommandExecutor,
  defineExecutor,
  type AnyExecutor,
  type AsyncCommandsOptions,
  type ExecutionContext,
} from '@asynccmd/runtime';
import type { RuntimeHarness, RuntimeHarnessFactory } from './harness.js';

const WORKER = fileURLToPath(new URL('./worker.mjs', import.meta.url));
const STOP_EXIT = fileURLToPath(new URL('./stop-exit.mjs', import.meta.url));

/** Polls `condition` every 10 ms; fails with `what` after `timeoutMs`. */
async function waitFor(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
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

/** What an adapter declares, so a gap is explicit in its test file rather than a silent skip. */
export interface RuntimeE2EFeatures {
  /** Server connections that can be lost (harness.interruptConnections); false for embedded SQLite. */
  readonly connections: boolean;
}

/**
 * The end-to-end suite: real store, real runtime, real processes. Every adapter runs it unchanged
 * with its own harness factory (see harness.ts).
 */
export function describeRuntimeE2E<Tx>(
  name: string,
  harnessFactory: RuntimeHarnessFactory<Tx>,
  features: RuntimeE2EFeatures,
): void {
  describe(`runtime end to end on ${name}`, () => {
    let harness: RuntimeHarness<Tx> | null = null;
    const cleanups: (() => Promise<void>)[] = [];
    let seq = 0;

    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
      await harness?.dispose();
      harness = null;
    });

    async function openStore(): Promise<CommandStore<Tx>> {
      harness ??= await harnessFactory(`e2e_${process.pid}_${++seq}_${Math.floor(Math.random() * 1e6)}`);
      return harness.openStore();
    }

    /** A started runtime on a fresh store connection, with every event it emits recorded. */
    async function instance<const E extends readonly AnyExecutor[]>(
      executors: E,
      options: Partial<AsyncCommandsOptions<Tx>> = {},
      { start = true }: { start?: boolean } = {},
    ) {
      const store = options.store ?? (await openStore());
      const runtime = createAsyncCommands<E, Tx>({ pollIntervalMs: 20, ...options, store, executors });
      const events: CommandEvent[] = [];
      runtime.on((e) => events.push(e));
      cleanups.push(() => runtime.stop({ timeoutMs: 2_000, closeStore: false }));
      if (start) {
        runtime.start();
        await waitFor('the first poll round', () => kinds(events, 'round').length > 0);
      }
      return { runtime, events, store, client: runtime.client };
    }

    it('SCHEDULED commands run inline in the poll loop, one after another', async () => {
      const order: number[] = [];
      let running = 0;
      let overlap = false;
      const step = defineExecutor<'e2e.step', { n: number }>({
        type: 'e2e.step',
        async execute({ n }) {
          overlap ||= running++ > 0;
          await new Promise((r) => setTimeout(r, 5));
          order.push(n);
          running--;
        },
      });
      const { client, events, store } = await instance([step]);
      await client.transaction(async (_tx, submit) => {
        for (const n of [1, 2, 3]) await submit('e2e.step', { n });
      });
      await waitFor('3 successes', () => kinds(events, 'succeeded').length === 3);
      expect(order).toEqual([1, 2, 3]);
      expect(overlap).toBe(false);
      expect(kinds(events, 'started').map((e) => e.kind === 'started' && e.runner)).toEqual([
        'inline',
        'inline',
        'inline',
      ]);
      const page = await store.list({ type: 'e2e.step' });
      expect(page.items.map((c) => c.status)).toEqual(['SUCCESS', 'SUCCESS', 'SUCCESS']);
    });

    it('ASYNC_POOL commands run concurrently in the shared pool', async () => {
      const both = gate();
      let running = 0;
      const work = defineExecutor<'e2e.pooled', { n: number }>({
        type: 'e2e.pooled',
        mode: 'ASYNC_POOL',
        async execute() {
          if (++running === 2) both.open();
          await both.promise; // finishes only once two run at the same time
        },
      });
      const { client, events } = await instance([work], { sharedPool: { concurrency: 2 } });
      await client.transaction(async (_tx, submit) => {
        await submit('e2e.pooled', { n: 1 });
        await submit('e2e.pooled', { n: 2 });
      });
      await waitFor('2 successes', () => kinds(events, 'succeeded').length === 2);
      const runners = kinds(events, 'started').map((e) => e.kind === 'started' && e.runner);
      expect(runners).toEqual(['pool:shared', 'pool:shared']);
    });

    it('a full round polls again at once, and a local submit wakes the sleeping loop', async () => {
      const ran: number[] = [];
      const step = defineExecutor<'e2e.batch', { n: number }>({
        type: 'e2e.batch',
        execute: ({ n }) => void ran.push(n),
      });
      // Rounds of 2 and a poll interval longer than the test: only "again at once" drains 5.
      const { runtime, client, events } = await instance(
        [step],
        { pollIntervalMs: 600_000, scheduledBatchSize: 2 },
        { start: false },
      );
      await client.transaction(async (_tx, submit) => {
        for (const n of [1, 2, 3, 4, 5]) await submit('e2e.batch', { n });
      });
      runtime.start();
      const claims = () => kinds(events, 'round').map((e) => e.kind === 'round' && e.claimed);
      await waitFor('three rounds', () => claims().length === 3);
      expect(claims()).toEqual([2, 2, 1]); // two full rounds followed at once; then the loop sleeps
      expect(ran).toEqual([1, 2, 3, 4, 5]);
      await client.transaction((_tx, submit) => submit('e2e.batch', { n: 6 }));
      await waitFor('the woken loop to run the new one', () => ran.length === 6 && claims().length >= 4);
      // (A store with cross-process wake-ups may echo our own notify: one more, empty, round.)
      expect(claims().slice(0, 4)).toEqual([2, 2, 1, 1]);
      expect(ran).toEqual([1, 2, 3, 4, 5, 6]);
    });

    it('IMMEDIATE starts right after commit, without waiting for the poll interval', async () => {
      const ran: string[] = [];
      const urgent = defineExecutor<'e2e.urgent', { orderId: string; version: number }>({
        type: 'e2e.urgent',
        mode: 'IMMEDIATE',
        execute: (p) => void ran.push(`${p.orderId}@${p.version}`),
      });
      // A poll interval far longer than the test timeout: only the after-commit claim can explain a run.
      const { client, events } = await instance([urgent], { pollIntervalMs: 600_000 });
      const rounds = kinds(events, 'round').length;
      const id = await client.transaction((_tx, submit) =>
        submit('e2e.urgent', { orderId: 'o-1', version: 3 }),
      );
      await waitFor('the IMMEDIATE command to succeed', () => kinds(events, 'succeeded').length === 1);
      expect(ran).toEqual(['o-1@3']);
      const claimed = kinds(events, 'claimed');
      expect(claimed).toEqual([expect.objectContaining({ via: 'immediate' })]);
      expect(claimed[0]?.kind === 'claimed' && claimed[0].command.id).toBe(id);
      // No poll round claimed anything meanwhile (one may run, empty, once the store's wake-up
      // subscription is live: it looks for what was committed before then).
      const later = kinds(events, 'round').slice(rounds);
      expect(later.map((e) => (e.kind === 'round' ? e.claimed : -1)).filter((n) => n !== 0)).toEqual([]);
    });

    it('a transaction that rolls back leaves no command, and nothing ever runs', async () => {
      let ran = 0;
      const urgent = defineExecutor<'e2e.rollback', { n: number }>({
        type: 'e2e.rollback',
        mode: 'IMMEDIATE',
        execute: () => void ran++,
      });
      const { client, events, store } = await instance([urgent]);
      await expect(
        client.transaction(async (_tx, submit) => {
          await submit('e2e.rollback', { n: 1 });
          throw new Error('business rule failed');
        }),
      ).rejects.toThrow('business rule failed');
      const after = kinds(events, 'round').length;
      await waitFor('three more poll rounds', () => kinds(events, 'round').length >= after + 3);
      expect(ran).toBe(0);
      expect((await store.list({})).items).toEqual([]);
      expect(kinds(events, 'submitted')).toEqual([]); // reported only once committed
    });

    it('isolation: a slow type saturating its own pool does not hold back a fast type', async () => {
      const release = gate();
      let slowRunning = 0;
      const slow = defineExecutor<'e2e.slow', { n: number }>({
        type: 'e2e.slow',
        mode: 'ASYNC_POOL',
        pool: 'slow',
        async execute() {
          slowRunning++;
          await release.promise;
        },
      });
      const fast = defineExecutor<'e2e.fast', { n: number }>({
        type: 'e2e.fast',
        mode: 'ASYNC_POOL',
        execute: () => undefined,
      });
      const { client, events, store } = await instance([slow, fast], { pools: { slow: { concurrency: 1 } } });
      await client.transaction(async (_tx, submit) => {
        for (const n of [1, 2, 3]) await submit('e2e.slow', { n });
        for (const n of [1, 2, 3]) await submit('e2e.fast', { n });
      });
      // All fast commands finish while the slow pool is still blocked on its first command. (The
      // slow one may start a round later than the fast ones: a round that began just before the
      // commit found no slow command yet, and its fast claim, sent after the commit, found them.)
      await waitFor(
        'the fast commands and the first slow one',
        () => kinds(events, 'succeeded').length === 3 && slowRunning === 1,
      );
      const succeeded = kinds(events, 'succeeded').map((e) => e.kind === 'succeeded' && e.command.type);
      expect(succeeded).toEqual(['e2e.fast', 'e2e.fast', 'e2e.fast']);
      expect(slowRunning).toBe(1);
      // The slow pool had no room, so its other commands were never claimed to sit in memory.
      const slowRows = (await store.list({ type: 'e2e.slow' })).items;
      expect(slowRows.map((c) => c.status).sort()).toEqual(['PENDING', 'PENDING', 'RUNNING']);
      release.open();
      await waitFor('the slow commands', () => kinds(events, 'succeeded').length === 6);
      expect(slowRunning).toBe(3);
    });

    it('a backlog drains in refill batches that never exceed the pool: every command runs once and ends SUCCESS', async () => {
      const runs = new Map<number, number>();
      let running = 0;
      let most = 0;
      const work = defineExecutor<'e2e.backlog', { n: number }>({
        type: 'e2e.backlog',
        mode: 'ASYNC_POOL',
        async execute({ n }) {
          most = Math.max(most, ++running);
          runs.set(n, (runs.get(n) ?? 0) + 1);
          await new Promise((r) => setTimeout(r, n % 3)); // finishing staggered, some together
          running--;
        },
      });
      // A poll interval longer than the test: only full rounds and pool refills drain the backlog.
      const { runtime, client, events, store } = await instance(
        [work],
        // A fixed queue of 0 (the adaptive default would queue more): claims never exceed the pool.
        { pollIntervalMs: 600_000, sharedPool: { concurrency: 4, queueSize: 0 } },
        { start: false },
      );
      const total = 40;
      await client.transaction(async (tx) => {
        await client.submitMany(
          tx,
          Array.from({ length: total }, (_, i) => ({ type: 'e2e.backlog' as const, payload: { n: i } })),
        );
      });
      runtime.start();
      await waitFor('the backlog', () => kinds(events, 'succeeded').length === total);
      expect([...runs.values()].every((count) => count === 1)).toBe(true);
      expect(runs.size).toBe(total);
      expect(most).toBeLessThanOrEqual(4);
      const claims = kinds(events, 'round').map((e) => (e.kind === 'round' ? e.claimed : 0));
      expect(claims.every((c) => c <= 4)).toBe(true); // never more than the pool can start
      expect(claims.reduce((a, b) => a + b, 0)).toBe(total);
      const rows = (await store.list({ type: 'e2e.backlog', limit: total })).items;
      expect(rows).toHaveLength(total);
      expect(rows.every((c) => c.status === 'SUCCESS')).toBe(true);
      expect(kinds(events, 'fenced')).toEqual([]);
    });

    it('caller-runs back-pressure: a full pool makes the submitter run the work, and nothing is lost', async () => {
      const callerStarted = gate();
      const runs = new Map<number, number>();
      const hot = defineExecutor<'e2e.hot', { n: number }>({
        type: 'e2e.hot',
        mode: 'IMMEDIATE',
        async execute({ n }) {
          runs.set(n, (runs.get(n) ?? 0) + 1);
          if (n === 0) await callerStarted.promise; // holds the only pool slot until a caller runs work
        },
      });
      const { client, events, store, runtime } = await instance([hot], {
        sharedPool: { concurrency: 1, queueSize: 0 },
        pollIntervalMs: 600_000,
      });
      runtime.events.onKind('started', (e) => {
        if (e.runner === 'caller') callerStarted.open();
      });
      const ids = await client.transaction(async (_tx, submit) => {
        const out: string[] = [];
        for (let n = 0; n < 5; n++) out.push(await submit('e2e.hot', { n }));
        return out;
      });
      await waitFor('all 5 to succeed', () => kinds(events, 'succeeded').length === 5);
      const runners = kinds(events, 'started').map((e) => e.kind === 'started' && e.runner);
      expect(runners[0]).toBe('pool:shared');
      expect(runners.filter((r) => r === 'caller').length).toBeGreaterThanOrEqual(1);
      expect([...runs.entries()].sort()).toEqual([0, 1, 2, 3, 4].map((n) => [n, 1]));
      const rows = await store.getMany(ids);
      expect(rows.map((r) => r.status)).toEqual(['SUCCESS', 'SUCCESS', 'SUCCESS', 'SUCCESS', 'SUCCESS']);
    });

    it('failures retry with backoff on the application clock, then become a DEAD letter', async () => {
      let now = Date.now();
      const clock = { now: () => new Date(now) };
      const attempts: number[] = [];
      const flaky = defineExecutor<'e2e.flaky', { n: number }>({
        type: 'e2e.flaky',
        maxRetry: 2,
        execute(_p, ctx: ExecutionContext<{ n: number }>) {
          attempts.push(ctx.attempt);
          throw new Error('payment gateway said no');
        },
      });
      const { client, events, runtime, store } = await instance([flaky], { clock });
      const retried: Date[] = [];
      runtime.events.onKind('retried', (e) => {
        retried.push(e.nextRunAt);
        now += 2 * 3_600_000; // past any backoff: the next poll finds it due
      });
      const id = await client.transaction((_tx, submit) => submit('e2e.flaky', { n: 1 }));
      const t0 = now;
      await waitFor('the dead letter', () => kinds(events, 'dead').length === 1);
      expect(attempts).toEqual([1, 2, 3]);
      // Default backoff min(60 s·2ⁿ, 1 h) from the (test) clock at each failure.
      expect(retried.map((d) => d.getTime())).toEqual([t0 + 60_000, t0 + 2 * 3_600_000 + 120_000]);
      const row = await store.get(id);
      expect(row).toMatchObject({ status: 'DEAD', retryCount: 3, lastError: 'payment gateway said no' });
      expect(row?.finishedAt).toBeInstanceOf(Date);
      // Each attempt is in the history, under the name of the instance that ran it.
      expect(row?.history.map((a) => [a.instance, a.outcome])).toEqual([
        [runtime.instanceId, 'failed'],
        [runtime.instanceId, 'failed'],
        [runtime.instanceId, 'dead'],
      ]);
    });

    it('a per-type timeout aborts the signal and counts as a failed attempt', async () => {
      let aborted: unknown = null;
      const stuck = defineExecutor<'e2e.stuck', { n: number }>({
        type: 'e2e.stuck',
        mode: 'ASYNC_POOL',
        timeoutMs: 50,
        maxRetry: 0,
        execute: (_p, ctx) =>
          new Promise<void>((resolve) =>
            ctx.signal.addEventListener('abort', () => {
              aborted = ctx.signal.reason;
              resolve(); // even an executor that "succeeds" after its timeout has failed
            }),
          ),
      });
      const { client, events, store } = await instance([stuck]);
      const id = await client.transaction((_tx, submit) => submit('e2e.stuck', { n: 1 }));
      await waitFor('the dead letter', () => kinds(events, 'dead').length === 1);
      expect(aborted).toMatchObject({ name: 'TimeoutError' });
      expect((await store.get(id))?.lastError).toBe('TimeoutError: command timed out after 50 ms');
    });

    it('a worker process killed with SIGKILL mid-execution: another instance reclaims and completes its command', async () => {
      const leaseMs = 1_000;
      const { client, store } = await instance([], { submitOnlyTypes: ['e2e.crash'] }, { start: false });
      const id = await client.transaction((tx) => client.submit(tx, 'e2e.crash' as never, { n: 1 } as never));
      const child: ChildProcess = spawn(process.execPath, [WORKER], {
        env: {
          ...process.env,
          ASYNCCMD_E2E_WORKER: JSON.stringify({
            store: harness?.workerStore,
            type: 'e2e.crash',
            leaseMs,
            pollIntervalMs: 20,
          }),
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      cleanups.push(async () => void child.kill('SIGKILL'));
      let out = '';
      child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
      await waitFor('the worker to start the command', () => out.includes(`started ${id}`), 20_000);
      expect((await store.get(id))?.status).toBe('RUNNING');
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;

      const ran: string[] = [];
      const crash = defineExecutor<'e2e.crash', { n: number }>({
        type: 'e2e.crash',
        mode: 'ASYNC_POOL',
        execute: (_p, ctx) => void ran.push(ctx.id),
      });
      const rescuer = await instance([crash], { leaseMs, store });
      await waitFor('the rescued command to succeed', () => kinds(rescuer.events, 'succeeded').length === 1);
      expect(ran).toEqual([id]);
      expect(kinds(rescuer.events, 'reclaimed')).toEqual([
        { kind: 'reclaimed', id, type: 'e2e.crash', dead: false },
      ]);
      expect(await store.get(id)).toMatchObject({ status: 'SUCCESS', rescueCount: 1 });
    });

    it('nothing outlives stop(): a process that starts, submits, runs and stops ends on its own at once', async () => {
      await openStore(); // migrates the namespace the child opens
      const child: ChildProcess = spawn(process.execPath, [STOP_EXIT], {
        env: { ...process.env, ASYNCCMD_E2E_WORKER: JSON.stringify({ store: harness?.workerStore }) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      cleanups.push(async () => void child.kill('SIGKILL'));
      let out = '';
      let err = '';
      child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      await waitFor('the child to run its commands and stop', () => out.includes('stopped'), 20_000);
      // stop() has resolved; with nothing left holding the event loop the process ends by itself.
      // (The default shutdown timeout is 30 s: a timer of it left behind holds the process that long.)
      const code = await Promise.race([
        exited,
        new Promise<'alive'>((r) => setTimeout(() => r('alive'), 1_000)),
      ]);
      expect(code, `still alive 1 s after stop(); ${err.trim()}`).toBe(0);
    });

    it('a live long-running command is never reclaimed: heartbeats keep a short lease alive', async () => {
      const leaseMs = 500;
      let runs = 0;
      const long = defineExecutor<'e2e.long', { n: number }>({
        type: 'e2e.long',
        mode: 'ASYNC_POOL',
        async execute() {
          runs++;
          await new Promise((r) => setTimeout(r, 3 * leaseMs)); // three leases long
        },
      });
      const a = await instance([long], { leaseMs });
      const b = await instance([long], { leaseMs }); // a second instance reclaiming every 20 ms
      const id = await a.client.transaction((_tx, submit) => submit('e2e.long', { n: 1 }));
      await waitFor(
        'the long command to succeed',
        () => kinds([...a.events, ...b.events], 'succeeded').length === 1,
      );
      const all = [...a.events, ...b.events];
      expect(runs).toBe(1);
      expect(kinds(all, 'reclaimed')).toEqual([]);
      expect(kinds(all, 'fenced')).toEqual([]);
      expect(await a.store.get(id)).toMatchObject({ status: 'SUCCESS', rescueCount: 0, retryCount: 0 });
    });

    it('graceful shutdown waits for running commands and releases claimed-but-unstarted ones', async () => {
      const release = gate();
      const started: string[] = [];
      const queued = defineExecutor<'e2e.queued', { n: number }>({
        type: 'e2e.queued',
        mode: 'ASYNC_POOL',
        async execute(_p, ctx) {
          started.push(ctx.id);
          await release.promise;
        },
      });
      const { runtime, client, events, store } = await instance([queued], {
        sharedPool: { concurrency: 1, queueSize: 3 },
      });
      const ids = await client.transaction(async (_tx, submit) => {
        const out: string[] = [];
        for (let n = 0; n < 4; n++) out.push(await submit('e2e.queued', { n }));
        return out;
      });
      await waitFor(
        'one running and three queued',
        () => started.length === 1 && runtime.state().heldLeases === 4,
      );
      const stopped = runtime.stop({ timeoutMs: 10_000, closeStore: false });
      await waitFor('the unstarted three to be released', () => kinds(events, 'released').length === 3);
      expect(kinds(events, 'succeeded')).toEqual([]); // stop is still waiting for the running one
      release.open();
      await stopped;
      expect(started).toHaveLength(1);
      const rows = new Map((await store.getMany(ids)).map((r) => [r.id, r]));
      expect(rows.get(started[0] ?? '')).toMatchObject({ status: 'SUCCESS' });
      const rest = ids.filter((id) => id !== started[0]).map((id) => rows.get(id));
      for (const r of rest) expect(r).toMatchObject({ status: 'PENDING', retryCount: 0, claimToken: null });
    });

    it('a claim taken away while running (admin requeue) aborts the signal; the stale outcome is fenced', async () => {
      const reasons: unknown[] = [];
      let runs = 0;
      const watched = defineExecutor<'e2e.watched', { n: number }>({
        type: 'e2e.watched',
        mode: 'ASYNC_POOL',
        leaseMs: 400,
        execute: (_p, ctx) =>
          ++runs > 1
            ? undefined
            : new Promise<void>((_, reject) =>
                ctx.signal.addEventListener('abort', () => {
                  reasons.push(ctx.signal.reason);
                  reject(ctx.signal.reason as Error);
                }),
              ),
      });
      const { client, events, store } = await instance([watched]);
      const id = await client.transaction((_tx, submit) => submit('e2e.watched', { n: 1 }));
      await waitFor('the first run', () => kinds(events, 'started').length === 1);
      const requeued = await store.requeue(id, new Date());
      expect(requeued._tag).toBe('Right');
      await waitFor('the second run to succeed', () => kinds(events, 'succeeded').length === 1);
      await waitFor('the first run to be fenced', () => kinds(events, 'fenced').length === 1);
      expect(runs).toBe(2);
      expect(reasons).toEqual([expect.objectContaining({ name: 'LeaseLostError' })]);
      expect(kinds(events, 'fenced')).toEqual([expect.objectContaining({ outcome: 'failed' })]);
      expect(await store.get(id)).toMatchObject({ status: 'SUCCESS', retryCount: 0 });
    });

    /** Where the store announces requeues and kills, the heartbeat is far away; elsewhere it is the bound. */
    function revocationTiming(store: CommandStore<Tx>) {
      return store.capabilities.revocations
        ? { told: 'at once', leaseMs: 120_000, heartbeatIntervalMs: 30_000 }
        : { told: 'at the next heartbeat', leaseMs: 60_000, heartbeatIntervalMs: 250 };
    }

    it('kill of a running command reaches its executor: at once where the store announces it, else at the next heartbeat', async () => {
      const store = await openStore();
      const { told, ...timing } = revocationTiming(store);
      let abortedAt = 0;
      let reason: unknown = null;
      const victim = defineExecutor<'e2e.victim', { n: number }>({
        type: 'e2e.victim',
        mode: 'ASYNC_POOL',
        execute: (_p, ctx) =>
          new Promise<void>((_, reject) =>
            ctx.signal.addEventListener('abort', () => {
              abortedAt = performance.now();
              reason = ctx.signal.reason;
              reject(ctx.signal.reason as Error);
            }),
          ),
      });
      const { client, events, runtime } = await instance([victim], { store, ...timing });
      expect(await runtime.hearingRevocations()).toBe(store.capabilities.revocations);
      const id = await client.transaction((_tx, submit) => submit('e2e.victim', { n: 1 }));
      await waitFor('it to start', () => kinds(events, 'started').length === 1);
      const killedAt = performance.now();
      expect((await store.kill(id, 'poison'))._tag).toBe('Right');
      await waitFor(`the executor to be told ${told}`, () => abortedAt > 0);
      const tookMs = abortedAt - killedAt;
      if (store.capabilities.revocations) {
        expect(tookMs).toBeLessThan(timing.heartbeatIntervalMs); // no heartbeat has run since the claim
        expect(reason).toMatchObject({ name: 'LeaseLostError', message: expect.stringContaining('killed') });
      } else {
        // The bound: one heartbeat interval, plus that heartbeat's own round trip on a busy machine.
        expect(tookMs).toBeLessThan(timing.heartbeatIntervalMs + 1_500);
        expect(reason).toMatchObject({
          name: 'LeaseLostError',
          message: expect.stringContaining('heartbeat'),
        });
      }
      await waitFor('the stale outcome to be fenced', () => kinds(events, 'fenced').length === 1);
      expect(await store.get(id)).toMatchObject({ status: 'CANCELLED', lastError: 'poison' });
    });

    it('requeue of a running command: no second run until the first executor has stopped, on any instance', async () => {
      const first = await openStore();
      const { told, ...timing } = revocationTiming(first);
      let running = 0;
      let most = 0;
      const runs: { instance: string; start: number; end: number }[] = [];
      const slow = (instance: () => string) =>
        defineExecutor<'e2e.requeued', { n: number }>({
          type: 'e2e.requeued',
          mode: 'ASYNC_POOL',
          async execute(_p, ctx) {
            most = Math.max(most, ++running);
            const run = { instance: instance(), start: performance.now(), end: 0 };
            runs.push(run);
            try {
              if (runs.length > 1) return;
              // Obeys its signal, but winds down for a while before it stops.
              await new Promise((r) => ctx.signal.addEventListener('abort', r));
              await new Promise((r) => setTimeout(r, 300));
              throw ctx.signal.reason;
            } finally {
              run.end = performance.now();
              running--;
            }
          },
        });
      let names: [string, string] = ['', ''];
      const a = await instance([slow(() => names[0])], { store: first, ...timing });
      const b = await instance([slow(() => names[1])], { store: await openStore(), ...timing });
      names = [a.runtime.instanceId, b.runtime.instanceId];
      await Promise.all([a.runtime.hearingRevocations(), b.runtime.hearingRevocations()]);
      const id = await a.client.transaction((_tx, submit) => submit('e2e.requeued', { n: 1 }));
      await waitFor('the first run', () => runs.length === 1);
      expect((await first.requeue(id, await first.now()))._tag).toBe('Right');
      // Well inside the old lease: only the first executor's runtime letting go explains a second run.
      await waitFor(`the holder to be told ${told}, stop, and the command to run again`, async () => {
        return (await first.get(id))?.status === 'SUCCESS';
      });
      expect(most).toBe(1);
      expect(runs).toHaveLength(2);
      expect(runs[1]!.start).toBeGreaterThanOrEqual(runs[0]!.end);
      const done = await first.get(id);
      expect(done?.history.map((h) => [h.instance, h.outcome])).toEqual([
        [runs[0]!.instance, 'requeued'],
        [runs[1]!.instance, 'succeeded'],
      ]);
      expect(kinds([...a.events, ...b.events], 'fenced')).toHaveLength(1);
    });

    it('interceptors wrap every execution and provider headers are stored with the command', async () => {
      const trail: string[] = [];
      const traced = defineExecutor<'e2e.traced', { n: number }>({
        type: 'e2e.traced',
        mode: 'IMMEDIATE',
        execute: (_p, ctx) => void trail.push(`execute ${ctx.command.headers.traceparent ?? '-'}`),
      });
      const { client, events, store } = await instance([traced], {
        headersProvider: () => ({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' }),
        interceptors: [
          async (command, next) => {
            trail.push(`outer in ${command.type}`);
            await next();
            trail.push('outer out');
          },
          async (_command, next) => {
            trail.push('inner in');
            await next();
            trail.push('inner out');
          },
        ],
      });
      const id = await client.transaction((_tx, submit) => submit('e2e.traced', { n: 1 }));
      await waitFor('the command', () => kinds(events, 'succeeded').length === 1);
      const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      expect(trail).toEqual(['outer in e2e.traced', 'inner in', `execute ${tp}`, 'inner out', 'outer out']);
      expect((await store.get(id))?.headers).toEqual({ traceparent: tp });
    });

    it('container wiring: an injectable executor class gets its dependencies and runs', async () => {
      const Greetings = Symbol('Greetings');
      @injectable()
      class GreetExecutor implements CommandExecutor<'e2e.greet', { name: string }> {
        readonly type = 'e2e.greet' as const;
        readonly mode = 'ASYNC_POOL' as const;
        constructor(@inject(Greetings) private readonly greetings: string[]) {}
        execute({ name }: { name: string }): void {
          this.greetings.push(`hello ${name}`);
        }
      }
      const store = await openStore();
      const container = new Container();
      const greetings: string[] = [];
      container.bind(Greetings).toConstantValue(greetings);
      container.load(asyncCommandModule({ store, executors: [GreetExecutor], pollIntervalMs: 20 }));
      const runtime = container.get<AsyncCommands<{ 'e2e.greet': { name: string } }, Tx>>(
        AsyncCommandTokens.Runtime,
      );
      const client = container.get<AsyncCommandClient<{ 'e2e.greet': { name: string } }, Tx>>(
        AsyncCommandTokens.Client,
      );
      expect(client).toBe(runtime.client);
      cleanups.push(() => runtime.stop({ timeoutMs: 2_000, closeStore: false }));
      const done = gate();
      runtime.events.onKind('succeeded', () => done.open());
      runtime.start();
      await client.transaction((_tx, submit) => submit('e2e.greet', { name: 'Ada' }));
      await done.promise;
      expect(greetings).toEqual(['hello Ada']);
    });

    // Registered only where the adapter declares server connections (see RuntimeE2EFeatures).
    if (features.connections) {
      it('survives lost connections and an outage: outcomes land, the loop resumes, nothing runs twice', async () => {
        const store = await openStore();
        const interrupt = harness?.interruptConnections?.bind(harness);
        const blackout = harness?.blackout?.bind(harness);
        if (!interrupt || !blackout)
          throw new Error(`the ${name} harness declares connections but cannot cut them`);
        const hold = gate();
        const runs = new Map<number, number>();
        const steady = defineExecutor<'e2e.steady', { n: number }>({
          type: 'e2e.steady',
          mode: 'ASYNC_POOL',
          async execute({ n }) {
            runs.set(n, (runs.get(n) ?? 0) + 1);
            if (n < 3) await hold.promise;
          },
        });
        const { client, events } = await instance([steady], { store, sharedPool: { concurrency: 4 } });
        const before = await client.transaction(async (_tx, submit) => {
          const ids: string[] = [];
          for (const n of [0, 1, 2]) ids.push(await submit('e2e.steady', { n }));
          return ids;
        });
        await waitFor('three running', () => kinds(events, 'started').length === 3);
        await interrupt(); // mid-execution: the next statements meet dead connections
        const restore = await blackout(); // then a database that answers nothing but errors
        hold.open();
        const failing = (op: string) => events.some((e) => e.kind === 'store-error' && e.operation === op);
        await waitFor('outcome writes and polls to fail', () => failing('complete') && failing('poll'));
        expect(kinds(events, 'succeeded')).toEqual([]);
        await restore();
        await waitFor(
          'the interrupted three to succeed',
          () => kinds(events, 'succeeded').length === 3,
          20_000,
        );
        const after = await client.transaction(async (_tx, submit) => [
          await submit('e2e.steady', { n: 3 }),
          await submit('e2e.steady', { n: 4 }),
        ]);
        await waitFor('two more after the outage', () => kinds(events, 'succeeded').length === 5, 20_000);
        expect([...runs.values()]).toEqual([1, 1, 1, 1, 1]);
        const rows = await store.getMany([...before, ...after]);
        expect(rows.map((r) => r.status)).toEqual(['SUCCESS', 'SUCCESS', 'SUCCESS', 'SUCCESS', 'SUCCESS']);
      });
    }

    it('shutdown past its timeout aborts what still runs and hands it back with nothing counted against it, the attempt in its history', async () => {
      const reasons: unknown[] = [];
      const endless = defineExecutor<'e2e.endless', { n: number }>({
        type: 'e2e.endless',
        mode: 'ASYNC_POOL',
        execute: (_p, ctx) =>
          new Promise<void>((_, reject) =>
            ctx.signal.addEventListener('abort', () => {
              reasons.push(ctx.signal.reason);
              reject(ctx.signal.reason as Error);
            }),
          ),
      });
      const { runtime, client, events, store } = await instance([endless]);
      const id = await client.transaction((_tx, submit) => submit('e2e.endless', { n: 1 }));
      await waitFor('it to start', () => kinds(events, 'started').length === 1);
      const dueAt = (await store.get(id))?.nextRunAt.getTime();
      await runtime.stop({ timeoutMs: 100, closeStore: false });
      expect(reasons).toEqual([expect.objectContaining({ name: 'ShutdownError' })]);
      expect(kinds(events, 'released')).toEqual([{ kind: 'released', id, type: 'e2e.endless' }]);
      const back = await store.get(id);
      expect(back).toMatchObject({ status: 'PENDING', retryCount: 0, claimToken: null });
      // The attempt ran and may have had effects: the history says so, and why it stopped.
      expect(back?.history).toEqual([
        expect.objectContaining({
          outcome: 'failed',
          error: 'ShutdownError: the instance is shutting down',
          startedAt: expect.any(Date),
        }),
      ]);
      expect(back?.lastError).toBe('ShutdownError: the instance is shutting down');
      // Its place in the queue is kept: due when it was.
      expect(back?.nextRunAt.getTime()).toBe(dueAt);
    });

    it('idempotent submit: a duplicate (type, bizKey) returns the unfinished command, flagged', async () => {
      let runs = 0;
      const once = defineExecutor<'e2e.once', { orderId: string }>({
        type: 'e2e.once',
        execute: () => void runs++,
      });
      const { client, events, runtime } = await instance([once], {}, { start: false });
      const first = await client.transaction((tx) =>
        client.submitIdempotent(tx, 'e2e.once', 'order-9', { orderId: '9' }),
      );
      const again = await client.transaction((tx) =>
        client.submitIdempotent(tx, 'e2e.once', 'order-9', { orderId: '9' }),
      );
      expect(first.duplicate).toBe(false);
      expect(again).toEqual({ id: first.id, duplicate: true, replaced: false });
      runtime.start();
      await waitFor('the command to run', () => kinds(events, 'succeeded').length === 1);
      // Finished: the key is free again, so a new command is accepted.
      const later = await client.transaction((tx) =>
        client.submitIdempotent(tx, 'e2e.once', 'order-9', { orderId: '9' }),
      );
      expect(later.duplicate).toBe(false);
      expect(later.id).not.toBe(first.id);
      await waitFor('the second command to run', () => kinds(events, 'succeeded').length === 2);
      expect(runs).toBe(2);
    });

    it("debounced submit (onPending 'replace'): a PENDING command takes each submit's payload and due time, then runs once with the last", async () => {
      const seen: number[] = [];
      const release = gate();
      const debounced = defineExecutor<'e2e.debounced', { v: number }>({
        type: 'e2e.debounced',
        async execute({ v }) {
          seen.push(v);
          await release.promise;
        },
      });
      const { client, events, runtime, store } = await instance([debounced], {}, { start: false });
      const submitV = (v: number, runAt?: Date) =>
        client.transaction((tx) =>
          client.submitIdempotent(
            tx,
            'e2e.debounced',
            'doc-1',
            { v },
            {
              onPending: 'replace',
              ...(runAt ? { runAt } : {}),
            },
          ),
        );
      const first = await submitV(1, new Date(Date.now() + 60_000));
      const pushed = new Date(Date.now() + 120_000);
      expect(await submitV(2, pushed)).toEqual({ id: first.id, duplicate: true, replaced: true });
      expect((await store.get(first.id))?.nextRunAt.getTime()).toBe(pushed.getTime());
      // The last submit is due now: the command runs once, with it.
      expect(await submitV(3)).toEqual({ id: first.id, duplicate: true, replaced: true });
      runtime.start();
      await waitFor('it to start', () => kinds(events, 'started').length === 1);
      // Running: its executor has the payload, so a submit no longer replaces it, and says so.
      expect(await submitV(4)).toEqual({ id: first.id, duplicate: true, replaced: false });
      expect((await store.get(first.id))?.payload).toEqual({ v: 3 });
      release.open();
      await waitFor('it to succeed', () => kinds(events, 'succeeded').length === 1);
      expect(seen).toEqual([3]);
      expect((await store.list({ type: 'e2e.debounced' })).items).toHaveLength(1);
    });

    it("'replace-keep-run-at' keeps the due time; a bad onPending is refused before anything is written", async () => {
      const once = defineExecutor<'e2e.throttled', { v: number }>({
        type: 'e2e.throttled',
        execute: () => undefined,
      });
      const { client, store } = await instance([once], {}, { start: false });
      const due = new Date(Date.now() + 60_000);
      const first = await client.transaction((tx) =>
        client.submitIdempotent(tx, 'e2e.throttled', 'k', { v: 1 }, { runAt: due }),
      );
      const next = await client.transaction((tx) =>
        client.submitIdempotent(tx, 'e2e.throttled', 'k', { v: 2 }, { onPending: 'replace-keep-run-at' }),
      );
      expect(next).toEqual({ id: first.id, duplicate: true, replaced: true });
      const row = await store.get(first.id);
      expect(row?.payload).toEqual({ v: 2 });
      expect(row?.nextRunAt.getTime()).toBe(due.getTime());
      await expect(
        client.transaction((tx) =>
          client.submitIdempotent(
            tx,
            'e2e.throttled',
            'k2',
            { v: 1 },
            {
              onPending: 'overwrite' as 'replace',
            },
          ),
        ),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', name: 'InvalidArgumentError' });
      expect((await store.list({ type: 'e2e.throttled', bizKey: 'k2' })).items).toEqual([]);
    });

    it('leading-edge throttle on two instances: a quiet key starts at once, the window merges a burst into one run when it ends', async () => {
      const seen: number[] = [];
      const paced = defineExecutor<'e2e.leading', { v: number }>({
        type: 'e2e.leading',
        execute: ({ v }) => void seen.push(v),
      });
      const windowMs = 1_500;
      const options = {
        submitWindows: { 'e2e.leading': { throttleMs: windowMs, edge: 'leading', later: 'merge' } as const },
      };
      const a = await instance([paced], options);
      const b = await instance([paced], options);
      const succeeded = () => kinds(a.events, 'succeeded').length + kinds(b.events, 'succeeded').length;
      const submit = (client: typeof a.client, v: number) =>
        client.transaction((tx) => client.submitCoalesced(tx, 'e2e.leading', { v }, { key: 'doc-1' }));
      const submittedAt = Date.now();
      const first = await submit(a.client, 1);
      expect(first.outcome).toBe('created');
      const firstDue = (await a.store.get(first.id))?.nextRunAt.getTime() ?? NaN;
      expect(firstDue).toBeGreaterThanOrEqual(submittedAt);
      expect(firstDue).toBeLessThanOrEqual(Date.now());
      await waitFor('the first to run', () => succeeded() === 1);
      // Six submits inside the window, three on each instance, at once: one command, due when the
      // window ends, carrying the payload of the last to write.
      const order: number[] = [];
      const burst = await Promise.all(
        [2, 3, 4, 5, 6, 7].map(async (v) => {
          const r = await submit(v % 2 === 0 ? a.client : b.client, v);
          order.push(v);
          return r;
        }),
      );
      const created = burst.filter((r) => r.outcome === 'created');
      expect(created).toHaveLength(1);
      expect(burst.filter((r) => r.outcome === 'throttled')).toHaveLength(5);
      const trailing = created[0]?.id ?? '';
      expect(new Set(burst.map((r) => r.id))).toEqual(new Set([trailing]));
      expect((await a.store.get(trailing))?.nextRunAt.getTime()).toBe(firstDue + windowMs);
      await waitFor('the merged command to run', () => succeeded() === 2);
      expect(seen).toEqual([1, order.at(-1)]);
      // The next window opens when that one ends: a submit now waits for it.
      const third = await submit(b.client, 8);
      expect(third.outcome).toBe('created');
      expect((await b.store.get(third.id))?.nextRunAt.getTime()).toBe(firstDue + 2 * windowMs);
    });
  });
}
