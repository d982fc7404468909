import { afterEach, describe, expect, it } from 'vitest';
import type { CommandStore } from '@asynccmd/core';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import type { AsyncCommands } from '../src/index.js';
import { createAsyncCommands, defineExecutor } from '../src/index.js';
import { openTempSqlite, type TempSqlite } from './ops/support.js';

type Types = { 't.rated': { n: number }; 't.free': { n: number }; 't.now': { n: number } };

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until(condition: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition()) && Date.now() < deadline) await sleep(10);
  expect(await condition()).toBe(true);
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

let db: TempSqlite;
const opened: { stop(): Promise<void> }[] = [];

afterEach(async () => {
  for (const runtime of opened.splice(0)) await runtime.stop();
  await db?.dispose();
});

const RATED = { maxStarts: 10, periodMs: 1_000, burst: 2 };
const NOW = { maxStarts: 4, periodMs: 1_000, burst: 1 };

/**
 * A runtime on its own connection to the test's file; every start is logged with the time of its
 * claim on the database clock (the command's startedAt): what the limit governs, whatever the
 * pool's queue adds on a loaded machine before the executor runs.
 */
function instance(starts: Map<string, number[]>) {
  const log = (type: string) => (_payload: unknown, ctx: { command: { startedAt: Date | null } }) => {
    const list = starts.get(type) ?? [];
    list.push(ctx.command.startedAt?.getTime() ?? Number.NaN);
    starts.set(type, list);
  };
  const runtime = createAsyncCommands({
    store: createSqliteStore({ filename: db.file }),
    executors: [
      defineExecutor<'t.rated', { n: number }>({
        type: 't.rated',
        mode: 'ASYNC_POOL',
        execute: log('t.rated'),
      }),
      defineExecutor<'t.free', { n: number }>({ type: 't.free', mode: 'ASYNC_POOL', execute: log('t.free') }),
      defineExecutor<'t.now', { n: number }>({ type: 't.now', mode: 'IMMEDIATE', execute: log('t.now') }),
    ],
    sharedPool: { concurrency: 8 },
    // Longer than the test runs: whatever runs on time was woken by a token, not by a poll.
    pollIntervalMs: 60_000,
    rateLimits: { 't.rated': RATED, 't.now': NOW },
  }) as AsyncCommands<Types>;
  opened.push(runtime);
  return runtime;
}

async function countOf(store: CommandStore, type: string, status: string): Promise<number> {
  const { counts } = await store.stats(new Date());
  return counts.filter((c) => c.type === type && c.status === status).reduce((n, c) => n + c.count, 0);
}

describe('rate limits (option `rateLimits`), two instances on one SQLite file', () => {
  it('never starts more than maxStarts of a rate-limited type in any period, across instances; all run, other types unthrottled', async () => {
    db = await openTempSqlite();
    const starts = new Map<string, number[]>();
    const [a, b] = [instance(starts), instance(starts)];
    await a.client.transaction(async (tx) => {
      await a.client.submitMany(
        tx,
        Array.from({ length: 30 }, (_, n) => ({ type: 't.rated' as const, payload: { n } })),
      );
      await a.client.submitMany(
        tx,
        Array.from({ length: 200 }, (_, n) => ({ type: 't.free' as const, payload: { n } })),
      );
    });
    a.start();
    b.start();
    // IMMEDIATE ones of a rate-limited type: claimed by id with a token, the rest left PENDING.
    for (let n = 0; n < 8; n++) {
      await b.client.transaction((tx, submit) => submit('t.now', { n }));
    }
    // Woken by tokens: with the minute-long poll alone, 30 would take the better part of an hour.
    await until(
      async () =>
        (await countOf(db.store, 't.free', 'SUCCESS')) === 200 &&
        (await countOf(db.store, 't.rated', 'SUCCESS')) === 30 &&
        (await countOf(db.store, 't.now', 'SUCCESS')) === 8,
      50_000,
    );

    const rated = starts.get('t.rated') ?? [];
    const now = starts.get('t.now') ?? [];
    const free = starts.get('t.free') ?? [];
    expect(rated).toHaveLength(30);
    expect(now).toHaveLength(8);
    expect(mostInAnyWindow(rated, RATED.periodMs)).toBeLessThanOrEqual(RATED.maxStarts);
    expect(mostInAnyWindow(now, NOW.periodMs)).toBeLessThanOrEqual(NOW.maxStarts);
    // Held to the sustained rate (never faster): 2 at once, then 8 a second for the other 28 (3.5 s).
    const spread = Math.max(...rated) - Math.min(...rated);
    expect(spread).toBeGreaterThanOrEqual(3_000);
    // The type without a rate limit, in the same runtimes, was not held to it.
    expect(mostInAnyWindow(free, RATED.periodMs)).toBeGreaterThan(RATED.maxStarts);
  }, 60_000);

  it('refuses a bad rate limit when the runtime is built, before anything is written', async () => {
    db = await openTempSqlite();
    const store = createSqliteStore({ filename: db.file });
    const build = (rateLimits: unknown) => () =>
      createAsyncCommands({ store, executors: [], rateLimits: rateLimits as never });
    for (const bad of [
      { 't.rated': { maxStarts: 1, periodMs: 1_000 } },
      { 't.rated': { maxStarts: 10, periodMs: 0 } },
      { 't.rated': { maxStarts: 10, periodMs: 1_000, burst: 10 } },
      { 't.rated': { maxStarts: -3, periodMs: 1_000 } },
    ]) {
      expect(build(bad)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
    expect(await db.store.rateLimits?.list()).toEqual([]);
    await store.close();
  });
});
