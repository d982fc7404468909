import { describe, expect, it } from 'vitest';
import type { ClaimRef, CommandEvent, CommandStore } from '@asynccmd/core';
import { createAsyncCommands, defineExecutor, type PoolOptions } from '../src/index.js';
import { WakeSignal } from '../src/wake-signal.js';
import { openTempSqlite } from './ops/support.js';
import { claimedRow, stubStore } from './stub-store.js';

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(condition()).toBe(true);
}

/** Lets every pending microtask, I/O callback and immediate run (a missed wake-up would show here). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 2));
}

/**
 * A runtime over a stub store with an endless backlog of `t.pooled` commands: every claim returns
 * as many rows as asked. Each command runs until its gate is opened.
 */
function backlogRuntime(pool: PoolOptions) {
  const limits: number[] = [];
  const completes: string[][] = [];
  const gates = new Map<string, () => void>();
  let next = 0;
  const store = stubStore({
    reclaimHung: async () => [],
    claimDue: async ({ limit }) => {
      limits.push(limit);
      return Array.from({ length: limit }, () => claimedRow(String(++next), 't.pooled'));
    },
    heartbeat: async (refs) => [...refs],
    complete: async (refs: readonly ClaimRef[]) => {
      completes.push(refs.map((r) => r.id));
      return refs.map((r) => r.id);
    },
    release: async (refs) => refs.map((r) => r.id),
    close: async () => undefined,
  });
  const pooled = defineExecutor<'t.pooled', Record<string, never>>({
    type: 't.pooled',
    mode: 'ASYNC_POOL',
    execute: (_p, ctx) => new Promise<void>((resolve) => gates.set(ctx.id, resolve)),
  });
  // A poll interval far longer than the test: every round here is a start, a refill or a wake-up.
  const runtime = createAsyncCommands({
    store,
    executors: [pooled],
    sharedPool: pool,
    pollIntervalMs: 600_000,
  });
  const events: CommandEvent[] = [];
  runtime.on((e) => events.push(e));
  const open = (...ids: string[]): void => {
    for (const id of ids) {
      const resolve = gates.get(id);
      expect(resolve, `command ${id} is running`).toBeDefined();
      gates.delete(id);
      resolve?.();
    }
  };
  const succeeded = () => events.filter((e) => e.kind === 'succeeded').length;
  return { runtime, limits, completes, gates, open, succeeded };
}

describe('Scheduler refills', () => {
  it('claims for a busy pool only once refillAt places are free, and a wake-up claims whatever is free', async () => {
    // refillAt defaults to 2; no top-up within the test, so only the threshold can explain a claim.
    // No queue: an adaptive one sized from times measured on a loaded machine would move refillAt.
    const t = backlogRuntime({ concurrency: 4, queueSize: 0, refillWaitMs: 600_000 });
    expect(t.runtime.state().scheduler.pools.find((p) => p.name === 'shared')?.refillAt).toBe(2);
    t.runtime.start();
    await until(() => t.gates.size === 4);
    expect(t.limits).toEqual([4]); // a full round, but no room left: no further claim

    t.open('1');
    await until(() => t.succeeded() === 1);
    await settle();
    expect(t.limits).toEqual([4]); // one free slot: not worth a statement while the pool is busy

    t.open('2');
    await until(() => t.gates.size === 4);
    expect(t.limits).toEqual([4, 2]);

    t.open('3');
    await until(() => t.succeeded() === 3);
    await settle();
    expect(t.limits).toEqual([4, 2]);
    t.runtime.wake(); // a local submit or a store wake-up: latency first
    await until(() => t.gates.size === 4);
    expect(t.limits).toEqual([4, 2, 1]);
    await t.runtime.stop({ timeoutMs: 100 });
  });

  it('completes a batch that finishes together in one statement, then claims a whole batch again', async () => {
    const t = backlogRuntime({ concurrency: 3, refillAt: 3, refillWaitMs: 600_000 });
    t.runtime.start();
    await until(() => t.gates.size === 3);
    t.open('1', '2', '3');
    await until(() => t.gates.size === 3 && t.succeeded() === 3);
    expect(t.completes).toEqual([['1', '2', '3']]);
    expect(t.limits).toEqual([3, 3]);
    await t.runtime.stop({ timeoutMs: 100 });
  });

  it('never claims past concurrency plus queue, and counts queue room towards refillAt', async () => {
    const t = backlogRuntime({ concurrency: 2, queueSize: 2, refillWaitMs: 600_000 }); // refillAt 2
    t.runtime.start();
    await until(() => t.gates.size === 2);
    expect(t.limits).toEqual([4]);
    expect(t.runtime.state().scheduler.pools.find((p) => p.name === 'shared')).toMatchObject({
      active: 2,
      queued: 2,
      free: 0,
    });
    t.open('1');
    await until(() => t.gates.size === 2 && t.succeeded() === 1); // a queued one took the slot
    await settle();
    expect(t.limits).toEqual([4]); // one place free
    t.open('2');
    await until(() => t.limits.length === 2);
    expect(t.limits).toEqual([4, 2]);
    expect(t.runtime.state().scheduler.pools.find((p) => p.name === 'shared')).toMatchObject({
      active: 2,
      queued: 2,
      free: 0,
    });
    await t.runtime.stop({ timeoutMs: 100 });
  });

  it('refills fewer than refillAt places once they have waited refillWaitMs (the rest run long)', async () => {
    const t = backlogRuntime({ concurrency: 4, refillAt: 4, refillWaitMs: 1 });
    t.runtime.start();
    await until(() => t.gates.size === 4);
    t.open('1');
    await until(() => t.limits.length === 2 && t.gates.size === 4);
    expect(t.limits).toEqual([4, 1]); // commands 2–4 still run: their slots never joined
    t.open('2', '5');
    await until(() => t.limits.length === 3 && t.gates.size === 4);
    expect(t.limits).toEqual([4, 1, 2]);
    await t.runtime.stop({ timeoutMs: 100 });
  });

  it('lets outcome writes and timers run between rounds when the store answers within microtasks', async () => {
    // SQLite's store settles every call without I/O: slots free (and wake the loop) while a round
    // is still being dispatched, and the rounds must still leave the event loop a turn.
    const db = await openTempSqlite();
    const backlog = 5_000;
    await db.store.transaction((tx) =>
      db.store.insert(
        tx,
        Array.from({ length: backlog }, () => ({
          type: 't.noop',
          payloadJson: '{}',
          maxRetry: 1,
          bizKey: null,
          runAt: null,
          headers: {},
          owner: null,
        })),
      ),
    );
    const log: string[] = [];
    const store: CommandStore = new Proxy(db.store, {
      get(target, prop, receiver) {
        const value: unknown = Reflect.get(target, prop, receiver);
        if (prop !== 'claimDue' && prop !== 'complete') return value;
        return (...args: unknown[]) => {
          log.push(prop);
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    let ran = 0;
    const noop = defineExecutor<'t.noop', Record<string, never>>({
      type: 't.noop',
      mode: 'ASYNC_POOL',
      execute: () => void ran++,
    });
    const runtime = createAsyncCommands({
      store,
      executors: [noop],
      sharedPool: { concurrency: 10 },
      pollIntervalMs: 600_000,
    });
    let claimsBeforeTimer = -1;
    const claims = () => log.filter((op) => op === 'claimDue').length;
    try {
      setTimeout(() => (claimsBeforeTimer = claims()), 0);
      runtime.start();
      await until(() => ran === backlog && log.includes('complete'));
      expect(claimsBeforeTimer).toBeGreaterThanOrEqual(0);
      expect(claimsBeforeTimer).toBeLessThan(claims()); // a timer ran while the backlog drained
      expect(log.indexOf('complete')).toBeLessThan(log.lastIndexOf('claimDue')); // outcomes interleave
    } finally {
      await runtime.stop({ timeoutMs: 1_000 });
      await db.dispose();
    }
  });

  it('refuses a refillAt outside 1..concurrency + queueSize and a negative refillWaitMs', () => {
    const store = stubStore({});
    const options = (refillAt: number) => ({
      store,
      executors: [],
      sharedPool: { concurrency: 2, queueSize: 1, refillAt },
    });
    expect(() => createAsyncCommands(options(0))).toThrow(/refillAt/);
    expect(() => createAsyncCommands(options(4))).toThrow(/refillAt/);
    expect(() => createAsyncCommands(options(3))).not.toThrow();
    expect(() =>
      createAsyncCommands({ store, executors: [], sharedPool: { concurrency: 1, refillWaitMs: -1 } }),
    ).toThrow(/refillWaitMs/);
  });
});

describe('WakeSignal', () => {
  it('keeps a wake-up that arrives while nobody waits, and a work wake-up outranks a refill', async () => {
    const signal = new WakeSignal();
    signal.wake('refill');
    signal.wake('work');
    signal.wake('refill');
    expect(await signal.wait(600_000)).toBe('work');
    const waiting = signal.wait(600_000);
    signal.wake('refill');
    expect(await waiting).toBe('refill');
    expect(await signal.wait(1)).toBe('poll');
    expect(signal.take()).toBeNull();
  });
});
