import { afterEach, describe, expect, it } from 'vitest';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { createAsyncCommands, defineExecutor, type FairShareOptions } from '../src/index.js';
import type { CommandStore } from '@asynccmd/core';
import { openTempSqlite, type TempSqlite } from './ops/support.js';

interface Call {
  readonly customerId?: string;
  readonly n: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until(condition: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition()) && Date.now() < deadline) await sleep(10);
  expect(await condition()).toBe(true);
}

let db: TempSqlite;
const opened: { stop(): Promise<void> }[] = [];

afterEach(async () => {
  for (const runtime of opened.splice(0)) await runtime.stop();
  await db?.dispose();
});

/** What the executors saw, shared by the instances of one test (one process). */
class ExecutionLog {
  readonly running = new Map<string, number>();
  readonly most = new Map<string, number>();
  done = 0;

  async run(key: string, ms: number): Promise<void> {
    const now = (this.running.get(key) ?? 0) + 1;
    this.running.set(key, now);
    this.most.set(key, Math.max(now, this.most.get(key) ?? 0));
    await sleep(ms);
    this.running.set(key, (this.running.get(key) ?? 1) - 1);
    this.done++;
  }
}

/** A started runtime on its own connection to the test's file. */
function instance(log: ExecutionLog, maxRunning: number) {
  // A limit is per type and key: the log counts each type's keys apart.
  const execute = (type: string) => async (p: Call) => log.run(`${type} ${p.customerId ?? '(none)'}`, 15);
  const runtime = createAsyncCommands({
    store: createSqliteStore({ filename: db.file }),
    executors: [
      defineExecutor<'erp.call', Call>({
        type: 'erp.call',
        mode: 'ASYNC_POOL',
        execute: execute('erp.call'),
      }),
      defineExecutor<'erp.now', Call>({ type: 'erp.now', mode: 'IMMEDIATE', execute: execute('erp.now') }),
    ],
    sharedPool: { concurrency: 8 },
    pollIntervalMs: 20,
    keyLimits: {
      'erp.call': { key: 'customerId', maxRunning },
      'erp.now': { key: 'customerId', maxRunning },
    },
  });
  opened.push(runtime);
  runtime.start();
  return runtime;
}

/** The most of `starts` (ms) that fall in any window [t, t + periodMs) beginning at one of them. */
function mostInAnyWindow(starts: readonly number[], periodMs: number): number {
  const sorted = [...starts].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (j < sorted.length && (sorted[j] as number) < (sorted[i] as number) + periodMs) j++;
    most = Math.max(most, j - i);
  }
  return most;
}

describe('key limits (keyLimits), on SQLite', () => {
  it('two instances never run more than the limit of one customer at once, and run everything once', async () => {
    db = await openTempSqlite();
    const log = new ExecutionLog();
    const [a, b] = [instance(log, 2), instance(log, 2)];
    const customers = ['c1', 'c2', 'c3'];
    await a.client.transaction(async (tx) => {
      await a.client.submitMany(
        tx,
        Array.from({ length: 12 }, (_, n) =>
          customers.map((customerId) => ({ type: 'erp.call' as const, payload: { customerId, n } })),
        ).flat(),
      );
      // Without the key field: not held by any key.
      await a.client.submit(tx, 'erp.call', { n: 99 });
    });
    // IMMEDIATE commands of a keyed type wait for a poll loop, which claims them within the limit.
    for (let n = 0; n < 6; n++) {
      await b.client.transaction((_tx, submit) => submit('erp.now', { customerId: 'c1', n }));
    }
    await until(() => log.done === 12 * 3 + 1 + 6);
    for (const key of [...customers.map((c) => `erp.call ${c}`), 'erp.now c1']) {
      expect(log.most.get(key), key).toBeLessThanOrEqual(2);
    }
    // The executors have returned; their outcomes are written just after.
    await until(async () => (await db.store.list({ status: 'SUCCESS', limit: 100 })).items.length === 43);
    expect((await db.store.list({ limit: 100 })).items).toHaveLength(43);
    expect(await db.store.keyLimits?.list()).toEqual([
      { type: 'erp.call', keyField: 'customerId', maxRunning: 2 },
      { type: 'erp.now', keyField: 'customerId', maxRunning: 2 },
    ]);
  });

  it('refuses bad key limits when the runtime is built', async () => {
    db = await openTempSqlite();
    const executors = [defineExecutor<'erp.call', Call>({ type: 'erp.call', execute: () => undefined })];
    const bad: unknown[] = [
      { key: 'customerId', maxRunning: 0 },
      { key: 'customerId', maxRunning: -1 },
      { key: 'customerId', maxRunning: 2.5 },
      { key: 'customer.id', maxRunning: 1 },
      { key: '', maxRunning: 1 },
      { key: (p: Call) => p.customerId, maxRunning: 1 },
      { key: 'customerId' },
      { key: 'customerId', maxRunning: 1, per: 'x' },
      null,
    ];
    for (const spec of bad) {
      expect(
        () => createAsyncCommands({ store: db.store, executors, keyLimits: { 'erp.call': spec as never } }),
        JSON.stringify(spec),
      ).toThrow(
        expect.objectContaining({
          code: 'INVALID_ARGUMENT',
          message: expect.stringContaining('`keyLimits`'),
        }),
      );
    }
    expect(() =>
      createAsyncCommands({
        store: db.store,
        executors,
        typeLimits: { 'erp.call': 3 },
        keyLimits: { 'erp.call': { key: 'customerId', maxRunning: 1 } },
      }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(await db.store.keyLimits?.list()).toEqual([]);
  });

  it('keyRateLimits: two instances start at most maxStarts of one tenant in any period, and run everything once', async () => {
    db = await openTempSqlite();
    const starts = new Map<string, number[]>();
    const rate = { key: 'tenant', maxStarts: 6, periodMs: 1_000, burst: 2 };
    const runtimes = [0, 1].map(() => {
      const runtime = createAsyncCommands({
        store: createSqliteStore({ filename: db.file }),
        executors: [
          defineExecutor<'tenant.sync', { tenant: string; n: number }>({
            type: 'tenant.sync',
            mode: 'ASYNC_POOL',
            // The claim's time on the database clock: what the limit governs (see rate-limits.test.ts).
            execute: ({ tenant }, ctx) => {
              starts.set(tenant, [
                ...(starts.get(tenant) ?? []),
                ctx.command.startedAt?.getTime() ?? Number.NaN,
              ]);
            },
          }),
        ],
        sharedPool: { concurrency: 8 },
        // Longer than the test runs: what starts on time was woken for a key's token, not by a poll.
        pollIntervalMs: 60_000,
        keyRateLimits: { 'tenant.sync': rate },
      });
      opened.push(runtime);
      runtime.start();
      return runtime;
    });
    const first = runtimes[0]!;
    await first.client.transaction((tx) =>
      first.client.submitMany(
        tx,
        Array.from({ length: 10 }, (_, n) =>
          ['t1', 't2'].map((tenant) => ({ type: 'tenant.sync' as const, payload: { tenant, n } })),
        ).flat(),
      ),
    );
    await until(() => (starts.get('t1')?.length ?? 0) + (starts.get('t2')?.length ?? 0) === 20);
    for (const tenant of ['t1', 't2']) {
      expect(starts.get(tenant), tenant).toHaveLength(10);
      expect(mostInAnyWindow(starts.get(tenant) ?? [], rate.periodMs), tenant).toBeLessThanOrEqual(
        rate.maxStarts,
      );
    }
    await until(async () => (await db.store.list({ status: 'SUCCESS', limit: 100 })).items.length === 20);
    expect(await db.store.keyRateLimits?.list()).toEqual([
      { type: 'tenant.sync', keyField: 'tenant', maxStarts: 6, periodMs: 1_000, burst: 2 },
    ]);
  });

  it('refuses bad key rate limits, and a type with another limit too, when the runtime is built', async () => {
    db = await openTempSqlite();
    const executors = [defineExecutor<'erp.call', Call>({ type: 'erp.call', execute: () => undefined })];
    const good = { key: 'customerId', maxStarts: 10, periodMs: 1_000 };
    const bad: unknown[] = [
      { ...good, maxStarts: 1 },
      { ...good, periodMs: 0 },
      { ...good, periodMs: -1 },
      { ...good, burst: 10 },
      { ...good, key: 'a-b' },
      { ...good, per: 1 },
    ];
    for (const spec of bad) {
      expect(
        () =>
          createAsyncCommands({ store: db.store, executors, keyRateLimits: { 'erp.call': spec as never } }),
        JSON.stringify(spec),
      ).toThrow(
        expect.objectContaining({
          code: 'INVALID_ARGUMENT',
          message: expect.stringContaining('`keyRateLimits`'),
        }),
      );
    }
    for (const other of [
      { rateLimits: { 'erp.call': { maxStarts: 10, periodMs: 1_000 } } },
      { typeLimits: { 'erp.call': 2 } },
      { keyLimits: { 'erp.call': { key: 'customerId', maxRunning: 2 } } },
    ]) {
      expect(
        () =>
          createAsyncCommands({ store: db.store, executors, keyRateLimits: { 'erp.call': good }, ...other }),
        JSON.stringify(other),
      ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
    expect(await db.store.keyRateLimits?.list()).toEqual([]);
  });

  /** A runtime of `import.row` commands under `fairShare` that logs each start's tenant into `started`. */
  function importRuntime(
    store: CommandStore,
    started: string[],
    pool: { queueSize: number; executeMs: number },
    fairShare: FairShareOptions,
  ) {
    const runtime = createAsyncCommands({
      store,
      executors: [
        defineExecutor<'import.row', { tenant: string; n: number }>({
          type: 'import.row',
          mode: 'ASYNC_POOL',
          execute: async ({ tenant }) => {
            started.push(tenant);
            await sleep(pool.executeMs);
          },
        }),
      ],
      sharedPool: { concurrency: 4, queueSize: pool.queueSize },
      pollIntervalMs: 20,
      fairShare: { 'import.row': fairShare },
    });
    opened.push(runtime);
    return runtime;
  }

  it('fairShare: with two instances, every small tenant’s commands start before 5 % of a big tenant’s backlog', async () => {
    db = await openTempSqlite();
    const started: string[] = [];
    const file = db.file;
    const runtimes = [0, 1].map(() =>
      importRuntime(
        createSqliteStore({ filename: file }),
        started,
        { queueSize: 4, executeMs: 2 },
        {
          key: 'tenant',
        },
      ),
    );
    const first = runtimes[0]!;
    // The big tenant's backlog first, then 20 small tenants' few commands behind it.
    await first.client.transaction((tx) =>
      first.client.submitMany(
        tx,
        Array.from({ length: 400 }, (_, n) => ({
          type: 'import.row' as const,
          payload: { tenant: 'big', n },
        })),
      ),
    );
    const small = Array.from({ length: 20 }, (_, i) => `small-${i}`);
    await first.client.transaction((tx) =>
      first.client.submitMany(
        tx,
        small.flatMap((tenant) =>
          [0, 1, 2].map((n) => ({ type: 'import.row' as const, payload: { tenant, n } })),
        ),
      ),
    );
    for (const runtime of runtimes) runtime.start();
    await until(() => started.length === 460, 60_000);
    const lastSmall = Math.max(...small.map((t) => started.lastIndexOf(t)));
    const bigBefore = started.slice(0, lastSmall).filter((t) => t === 'big').length;
    expect(bigBefore).toBeLessThan(400 * 0.05);
    expect(await db.store.keyLimits?.list()).toEqual([
      { type: 'import.row', keyField: 'tenant', maxRunning: 100_000 },
    ]);
  });

  it('fairShare weights: a tenant of weight 3 starts three commands to a plain tenant’s one while both wait', async () => {
    db = await openTempSqlite();
    const started: string[] = [];
    const runtime = importRuntime(
      db.store,
      started,
      { queueSize: 8, executeMs: 1 },
      {
        key: 'tenant',
        weights: { gold: 3 },
      },
    );
    // Both backlogs submitted interleaved: without weights they would start one for one.
    await runtime.client.transaction((tx) =>
      runtime.client.submitMany(
        tx,
        Array.from({ length: 200 }, (_, n) => ['gold', 'plain'].map((tenant) => ({ tenant, n })))
          .flat()
          .map((payload) => ({ type: 'import.row' as const, payload })),
      ),
    );
    runtime.start();
    await until(() => started.length === 400, 60_000);
    // The first 200 starts, while both tenants wait: three of gold to one of plain.
    const gold = started.slice(0, 200).filter((t) => t === 'gold').length;
    expect(gold).toBeGreaterThanOrEqual(140);
    expect(gold).toBeLessThanOrEqual(160);
  });

  it('refuses a bad fairShare, or one beside another key or type limit of the type', async () => {
    db = await openTempSqlite();
    const executors = [defineExecutor<'erp.call', Call>({ type: 'erp.call', execute: () => undefined })];
    for (const spec of [
      { key: 'a.b' },
      { key: 7 },
      {},
      { key: 'tenant', maxRunning: 2 },
      null,
      'tenant',
      { key: 'tenant', weights: { gold: 0 } },
      { key: 'tenant', weights: { gold: 2.5 } },
      { key: 'tenant', weights: { '': 2 } },
      { key: 'tenant', weights: [3] },
    ]) {
      expect(
        () => createAsyncCommands({ store: db.store, executors, fairShare: { 'erp.call': spec as never } }),
        JSON.stringify(spec),
      ).toThrow(
        expect.objectContaining({
          code: 'INVALID_ARGUMENT',
          message: expect.stringContaining('`fairShare`'),
        }),
      );
    }
    for (const other of [
      { typeLimits: { 'erp.call': 2 } },
      { keyLimits: { 'erp.call': { key: 'customerId', maxRunning: 2 } } },
      { keyRateLimits: { 'erp.call': { key: 'customerId', maxStarts: 5, periodMs: 1_000 } } },
    ]) {
      expect(
        () =>
          createAsyncCommands({
            store: db.store,
            executors,
            fairShare: { 'erp.call': { key: 'customerId' } },
            ...other,
          }),
        JSON.stringify(other),
      ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
  });

  it('a rate limit and a key limit on one type: within both, everything runs once', async () => {
    db = await openTempSqlite();
    const log = new ExecutionLog();
    const runtime = createAsyncCommands({
      store: db.store,
      executors: [
        defineExecutor<'erp.call', Call>({
          type: 'erp.call',
          mode: 'ASYNC_POOL',
          execute: async (p) => log.run(p.customerId ?? '(none)', 5),
        }),
      ],
      sharedPool: { concurrency: 8 },
      pollIntervalMs: 20,
      rateLimits: { 'erp.call': { maxStarts: 50, periodMs: 1_000, burst: 5 } },
      keyLimits: { 'erp.call': { key: 'customerId', maxRunning: 1 } },
    });
    opened.push(runtime);
    runtime.start();
    await runtime.client.transaction((tx) =>
      runtime.client.submitMany(
        tx,
        Array.from({ length: 8 }, (_, n) =>
          ['a', 'b', 'c'].map((customerId) => ({ type: 'erp.call' as const, payload: { customerId, n } })),
        ).flat(),
      ),
    );
    await until(async () => (await db.store.list({ status: 'SUCCESS', limit: 100 })).items.length === 24);
    expect(log.done).toBe(24);
    for (const key of ['a', 'b', 'c']) expect(log.most.get(key), key).toBe(1);
  });
});
