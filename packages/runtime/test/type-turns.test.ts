import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { createAsyncCommands, defineExecutor } from '../src/index.js';
import { openTempSqlite, type TempSqlite } from './ops/support.js';

/** The test's database and the runtimes on it, undone after each test. */
let db: TempSqlite | undefined;
const runtimes: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((r) => r.stop()));
  await db?.dispose();
  db = undefined;
});

const BULK = 300;
const URGENT = 6;

/**
 * One pool of three types: `bulk`'s backlog submitted first, then a few `urgent` and `other`
 * commands behind it at the same priority. Returns the order the executors started them in.
 */
async function startOrder(
  typeTurns: boolean | undefined,
  pool: 'mixed' | 'shared' | 'scheduled' = 'mixed',
): Promise<string[]> {
  db = await openTempSqlite();
  const file = db.file;
  const started: string[] = [];
  const execute = (type: string) => async () => {
    started.push(type);
    await sleep(1);
  };
  const runtime = createAsyncCommands({
    store: createSqliteStore({ filename: file }),
    executors: (['bulk', 'urgent', 'other'] as const).map((type) =>
      defineExecutor<typeof type, { n: number }>({
        type,
        ...(pool === 'scheduled'
          ? { mode: 'SCHEDULED' as const }
          : { mode: 'ASYNC_POOL' as const, ...(pool === 'mixed' ? { pool } : {}) }),
        execute: execute(type),
      }),
    ),
    ...(pool === 'mixed'
      ? { pools: { mixed: { concurrency: 4, ...(typeTurns === undefined ? {} : { typeTurns }) } } }
      : pool === 'shared'
        ? { sharedPool: { concurrency: 4, ...(typeTurns === undefined ? {} : { typeTurns }) } }
        : typeTurns === undefined
          ? {}
          : { scheduledTypeTurns: typeTurns }),
    pollIntervalMs: 20,
  });
  runtimes.push(runtime);
  await runtime.client.transaction(async (tx) => {
    await runtime.client.submitMany(
      tx,
      Array.from({ length: BULK }, (_, n) => ({ type: 'bulk' as const, payload: { n } })),
    );
  });
  await runtime.client.transaction(async (tx) => {
    await runtime.client.submitMany(tx, [
      ...Array.from({ length: URGENT }, (_, n) => ({ type: 'urgent' as const, payload: { n } })),
      { type: 'other' as const, payload: { n: 0 } },
    ]);
  });
  runtime.start();
  const deadline = Date.now() + 60_000;
  while (started.length < BULK + URGENT + 1 && Date.now() < deadline) await sleep(10);
  expect(started).toHaveLength(BULK + URGENT + 1);
  return started;
}

describe('the types of a pool take turns (typeTurns)', () => {
  it('with typeTurns, the commands behind another type’s backlog start in the first rounds; without, after it', async () => {
    const turns = await startOrder(true);
    // Each round shares the pool's places among the three types: the urgent ones and the other
    // start among the first few dozen, long before the bulk backlog is done.
    const lastUrgent = turns.lastIndexOf('urgent');
    expect(lastUrgent).toBeLessThan(60);
    expect(turns.indexOf('other')).toBeLessThan(60);
    await runtimes.splice(0)[0]!.stop();
    await db!.dispose();

    const strict = await startOrder(undefined);
    // One claim order over the pool's types: the bulk backlog, due first, goes first.
    expect(strict.indexOf('urgent')).toBeGreaterThanOrEqual(BULK - 20);
  }, 120_000);

  it('the shared pool takes the option too', async () => {
    const turns = await startOrder(true, 'shared');
    expect(turns.lastIndexOf('urgent')).toBeLessThan(60);
  }, 120_000);

  it('the SCHEDULED loop’s types take turns with scheduledTypeTurns; without, one claim order', async () => {
    const turns = await startOrder(true, 'scheduled');
    expect(turns.lastIndexOf('urgent')).toBeLessThan(60);
    expect(turns.indexOf('other')).toBeLessThan(60);
    await runtimes.splice(0)[0]!.stop();
    await db!.dispose();

    const strict = await startOrder(undefined, 'scheduled');
    expect(strict.indexOf('urgent')).toBeGreaterThanOrEqual(BULK - 20);
  }, 120_000);

  it('a type limit holds within a type’s turn', async () => {
    db = await openTempSqlite();
    const running = { limited: 0, most: 0, done: 0 };
    const runtime = createAsyncCommands({
      store: createSqliteStore({ filename: db.file }),
      executors: [
        defineExecutor<'limited', { n: number }>({
          type: 'limited',
          mode: 'ASYNC_POOL',
          pool: 'mixed',
          execute: async () => {
            running.most = Math.max(running.most, ++running.limited);
            await sleep(2);
            running.limited--;
            running.done++;
          },
        }),
        defineExecutor<'free', { n: number }>({
          type: 'free',
          mode: 'ASYNC_POOL',
          pool: 'mixed',
          execute: async () => {
            await sleep(2);
            running.done++;
          },
        }),
      ],
      pools: { mixed: { concurrency: 6, typeTurns: true } },
      typeLimits: { limited: 2 },
      pollIntervalMs: 20,
    });
    runtimes.push(runtime);
    await runtime.client.transaction((tx) =>
      runtime.client.submitMany(tx, [
        ...Array.from({ length: 40 }, (_, n) => ({ type: 'limited' as const, payload: { n } })),
        ...Array.from({ length: 40 }, (_, n) => ({ type: 'free' as const, payload: { n } })),
      ]),
    );
    expect(runtime.state().scheduler.pools).toContainEqual(
      expect.objectContaining({ name: 'mixed', typeTurns: true }),
    );
    runtime.start();
    const deadline = Date.now() + 60_000;
    while (running.done < 80 && Date.now() < deadline) await sleep(10);
    expect(running.done).toBe(80);
    expect(running.most).toBeLessThanOrEqual(2);
  }, 120_000);

  it('refuses a scheduledTypeTurns that is not a boolean', async () => {
    const { store } = (db = await openTempSqlite());
    expect(() =>
      createAsyncCommands({
        store,
        executors: [defineExecutor({ type: 't', mode: 'SCHEDULED', execute: () => undefined })],
        scheduledTypeTurns: 1 as never,
      }),
    ).toThrow(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        message: expect.stringContaining('scheduledTypeTurns'),
      }),
    );
  });

  it('refuses a typeTurns that is not a boolean', async () => {
    const { store } = (db = await openTempSqlite());
    expect(() =>
      createAsyncCommands({
        store,
        executors: [defineExecutor({ type: 't', mode: 'ASYNC_POOL', pool: 'p', execute: () => undefined })],
        pools: { p: { concurrency: 2, typeTurns: 'yes' as never } },
      }),
    ).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('typeTurns') }),
    );
  });
});
