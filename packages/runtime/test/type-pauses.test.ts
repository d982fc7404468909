import { afterEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import type { CommandStore } from '@asynccmd/core';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import type { AsyncCommands } from '../src/index.js';
import { checkHealth, createAsyncCommands, defineExecutor } from '../src/index.js';
import { PAUSED_TYPES_REFRESH_MS } from '../src/type-pauses.js';
import { openTempSqlite, type TempSqlite } from './ops/support.js';

type Types = { 't.mail': { n: number }; 't.other': { n: number }; 't.now': { n: number } };

async function until(condition: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition()) && Date.now() < deadline) await sleep(10);
  expect(await condition()).toBe(true);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let db: TempSqlite;
const opened: { stop(): Promise<void> }[] = [];

afterEach(async () => {
  for (const runtime of opened.splice(0)) await runtime.stop();
  await db?.dispose();
});

/** A runtime on its own connection to the test's file, running t.mail and t.other, recording runs. */
function instance(runs: string[], options: { pollIntervalMs?: number } = {}) {
  const store = createSqliteStore({ filename: db.file });
  const mail = defineExecutor<'t.mail', { n: number }>({
    type: 't.mail',
    mode: 'ASYNC_POOL',
    execute: ({ n }) => void runs.push(`mail ${n}`),
  });
  const other = defineExecutor<'t.other', { n: number }>({
    type: 't.other',
    execute: ({ n }) => void runs.push(`other ${n}`),
  });
  const now = defineExecutor<'t.now', { n: number }>({
    type: 't.now',
    mode: 'IMMEDIATE',
    execute: ({ n }) => void runs.push(`now ${n}`),
  });
  const runtime = createAsyncCommands({
    store,
    executors: [mail, other, now],
    pollIntervalMs: options.pollIntervalMs ?? 50,
  });
  opened.push(runtime);
  return runtime;
}

async function submit(runtime: AsyncCommands<Types>, type: keyof Types, from: number, count: number) {
  const items = Array.from({ length: count }, (_, i) => ({ type, payload: { n: from + i } }));
  await runtime.client.transaction((tx) => runtime.client.submitMany(tx, items));
}

async function pendingOf(store: CommandStore, type: string): Promise<number> {
  const { counts } = await store.stats(new Date());
  return counts.find((c) => c.type === type && c.status === 'PENDING')?.count ?? 0;
}

describe('type pauses (runtime.typePauses), two instances on one SQLite file', () => {
  it('a paused type is claimed by no instance while its submits go in and other types run; resumed, each command runs once', async () => {
    db = await openTempSqlite();
    const runs: string[] = [];
    const a = instance(runs) as AsyncCommands<Types>;
    const b = instance(runs) as AsyncCommands<Types>;
    a.start();
    b.start();

    expect(await a.typePauses.pause('t.mail', 'SMTP relay down')).toBe(true);
    expect(await a.typePauses.pause('t.mail', 'again')).toBe(false);
    expect(await a.typePauses.list()).toEqual([
      { type: 't.mail', pausedAt: expect.any(Date), reason: 'SMTP relay down' },
    ]);
    // B goes by the table once it has read it again.
    await until(() => b.state().scheduler.pausedTypes.includes('t.mail'), PAUSED_TYPES_REFRESH_MS * 5);
    expect(a.state().scheduler.pausedTypes).toEqual(['t.mail']);

    await submit(a, 't.mail', 0, 40);
    await submit(b, 't.other', 0, 40);
    await until(() => runs.filter((r) => r.startsWith('other')).length === 40);
    await sleep(PAUSED_TYPES_REFRESH_MS * 1.5); // several poll rounds on both
    expect(runs.filter((r) => r.startsWith('mail'))).toEqual([]);
    expect(await pendingOf(db.store, 't.mail')).toBe(40);

    expect(await b.typePauses.resume('t.mail')).toBe(true);
    expect(await b.typePauses.resume('t.mail')).toBe(false);
    await until(() => runs.filter((r) => r.startsWith('mail')).length === 40);
    await until(() => a.state().scheduler.pausedTypes.length === 0, PAUSED_TYPES_REFRESH_MS * 5);
    expect(new Set(runs).size).toBe(runs.length); // none twice
    expect(await pendingOf(db.store, 't.mail')).toBe(0);
    expect(await a.typePauses.list()).toEqual([]);
  });

  it('an IMMEDIATE command of a paused type stays PENDING after its commit, and runs after the resume', async () => {
    db = await openTempSqlite();
    const runs: string[] = [];
    const a = instance(runs) as AsyncCommands<Types>;
    a.start();
    await a.typePauses.pause('t.now');
    await submit(a, 't.now', 1, 3);
    await sleep(300);
    expect(runs).toEqual([]);
    expect(await pendingOf(db.store, 't.now')).toBe(3);
    await a.typePauses.resume('t.now');
    await until(() => runs.length === 3);
    expect([...runs].sort()).toEqual(['now 1', 'now 2', 'now 3']);
  });

  it('a pause written by another process (the store, as the admin API and the CLI write it) reaches a running instance; so does its resume, with a long poll interval', async () => {
    db = await openTempSqlite();
    const runs: string[] = [];
    const a = instance(runs, { pollIntervalMs: 60_000 }) as AsyncCommands<Types>;
    a.start();
    const outside = createSqliteStore({ filename: db.file });
    try {
      expect(await outside.typePauses.pause('t.mail', 'from the CLI')).toBe(true);
      await until(() => a.state().scheduler.pausedTypes.includes('t.mail'), PAUSED_TYPES_REFRESH_MS * 5);
      await submit(a, 't.mail', 0, 5);
      await sleep(200);
      expect(runs).toEqual([]);
      expect(await outside.typePauses.resume('t.mail')).toBe(true);
      // Not the 60 s poll: the read that finds the resume wakes the loop.
      await until(() => runs.length === 5, PAUSED_TYPES_REFRESH_MS * 5);
    } finally {
      await outside.close();
    }
  });

  it('refuses bad input with INVALID_ARGUMENT and writes nothing', async () => {
    db = await openTempSqlite();
    const a = instance([]) as AsyncCommands<Types>;
    const code = (p: Promise<unknown>) =>
      p.then(
        () => 'resolved',
        (e: { code?: string }) => e.code,
      );
    expect(await code(a.typePauses.pause(''))).toBe('INVALID_ARGUMENT');
    expect(await code(a.typePauses.pause('x'.repeat(129)))).toBe('INVALID_ARGUMENT');
    expect(await code(a.typePauses.pause('t.mail', 'r'.repeat(1_001)))).toBe('INVALID_ARGUMENT');
    expect(await code(a.typePauses.pause('t\u0000mail'))).toBe('INVALID_ARGUMENT');
    expect(await code(a.typePauses.resume(42 as unknown as string))).toBe('INVALID_ARGUMENT');
    expect(await a.typePauses.list()).toEqual([]);
  });

  it('refuses to pause a type it neither executes nor submits; takes a submit-only one, and resumes any', async () => {
    db = await openTempSqlite();
    const a = instance([]) as AsyncCommands<Types>;
    const refused = await a.typePauses.pause('t.mial').then(
      () => null,
      (e: { code?: string; message?: string }) => e,
    );
    expect(refused).toMatchObject({
      code: 'UNKNOWN_COMMAND_TYPE',
      message: expect.stringContaining('t.mail'),
    });
    expect(await a.typePauses.list()).toEqual([]);
    // Another service's type, named in submitOnlyTypes, is known here: hostile text is only text.
    const hostile = "elsewhere'); DROP TABLE async_command; --";
    const submitter = createAsyncCommands({
      store: createSqliteStore({ filename: db.file }),
      executors: [],
      submitOnlyTypes: [hostile],
    });
    opened.push(submitter);
    expect(await submitter.typePauses.pause(hostile)).toBe(true);
    expect((await a.typePauses.list()).map((p) => p.type)).toEqual([hostile]);
    // A pause made where types are not known (the CLI) can be lifted anywhere.
    expect(await a.typePauses.resume(hostile)).toBe(true);
  });

  it('stops at once when stopped right after start, before the first read of the paused types', async () => {
    db = await openTempSqlite();
    const a = instance([]);
    opened.pop(); // stopped here
    a.start();
    const began = performance.now();
    await a.stop({ timeoutMs: 10_000 });
    expect(performance.now() - began).toBeLessThan(2_000);
  });

  it('keeps claiming when the paused types cannot be read (a table not yet migrated), and says so', async () => {
    db = await openTempSqlite();
    const raw = new Database(db.file);
    raw.exec('DROP TABLE async_command_paused_types');
    raw.close();
    const runs: string[] = [];
    const a = instance(runs) as AsyncCommands<Types>;
    a.start();
    await submit(a, 't.other', 0, 10);
    await until(() => runs.length === 10);
    expect(a.state().failingStoreOperations).toContain('typePauses');
    // Health judges the database by its probe: unknown pauses neither hide nor fake an outage.
    const health = await checkHealth(db.store);
    expect(health).toMatchObject({ status: 'UP', checks: { database: 'UP', pausedTypes: null } });
    expect(health).not.toHaveProperty('pausedTypes');
  });
});
