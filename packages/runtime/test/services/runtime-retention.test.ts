import { setTimeout as sleep } from 'node:timers/promises';
import type { CommandEvent, CommandId, CommandStore } from '@asynccmd/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAsyncCommands } from '../../src/create-async-commands.js';
import { defineExecutor } from '../../src/executor.js';
import type { OpsDatabase } from '../ops/admin-http.suite.js';
import { openMysql, openPostgres, openSqlite } from '../ops/databases.js';
import { makeDead, recordingLogger, submit, succeed, untilDatabaseClockPasses } from '../ops/support.js';

/** The same real store, counting its purge statements. */
function countingPurges(store: CommandStore): { readonly store: CommandStore; purges: () => number } {
  let purges = 0;
  const counted = new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== 'function') return value;
      const method = (value as (...a: unknown[]) => unknown).bind(target);
      if (property !== 'purge') return method;
      return (...args: unknown[]) => {
        purges++;
        return method(...args);
      };
    },
  });
  return { store: counted, purges: () => purges };
}

async function waitFor(what: string, condition: () => Promise<boolean> | boolean): Promise<void> {
  for (let i = 0; i < 1_000; i++) {
    if (await condition()) return;
    await sleep(10);
  }
  throw new Error(`timed out waiting for ${what}`);
}

let sequence = 0;

describe.each([
  ['SQLite', () => openSqlite()],
  ['PostgreSQL', () => openPostgres('svc_retention')],
  ['MySQL', () => openMysql('svc_retention')],
] as const)('retention as a runtime option on %s', (_name, open) => {
  let db: OpsDatabase;
  beforeAll(async () => {
    db = await open();
  });
  afterAll(async () => {
    await db?.dispose();
  });

  /** Two SUCCESS, one CANCELLED, one DEAD and one PENDING command of a type no runtime here runs. */
  async function finishedCommands() {
    const type = `retention.${++sequence}`;
    const done: CommandId[] = [];
    for (let i = 0; i < 2; i++) done.push((await succeed(db.store, await submit(db.store, type))).id);
    const cancelled = await submit(db.store, type);
    await db.store.cancel(cancelled);
    done.push(cancelled);
    const dead = await makeDead(db.store, type);
    const pending = await submit(db.store, type);
    await untilDatabaseClockPasses(db.store, (await db.store.get(dead))?.finishedAt ?? new Date());
    return { done, dead, pending };
  }

  const idle = defineExecutor({ type: 'retention.idle', execute: () => undefined });

  it('is off unless asked: a runtime without it deletes nothing', async () => {
    const { done } = await finishedCommands();
    const counted = countingPurges(db.store);
    const runtime = createAsyncCommands({ store: counted.store, executors: [idle], pollIntervalMs: 20 });
    const rounds: CommandEvent[] = [];
    runtime.on((e) => e.kind === 'round' && rounds.push(e));
    runtime.start();
    await waitFor('three rounds', () => rounds.length >= 3);
    await runtime.stop({ closeStore: false });
    expect(counted.purges()).toBe(0);
    for (const id of done) expect((await db.store.get(id))?.status).toMatch(/SUCCESS|CANCELLED/);
  });

  it('the runtime purges finished commands on its own while it runs, and stop() ends it', async () => {
    const { done, dead, pending } = await finishedCommands();
    const counted = countingPurges(db.store);
    const { logger, entries } = recordingLogger();
    const runtime = createAsyncCommands({
      store: counted.store,
      executors: [idle],
      logger,
      pollIntervalMs: 20,
      retention: { olderThanMs: 0, intervalMs: 50 },
    });
    runtime.start();
    await waitFor('the finished commands to be purged', async () => {
      for (const id of done) if ((await db.store.get(id)) !== null) return false;
      return true;
    });
    expect((await db.store.get(dead))?.status).toBe('DEAD'); // dead letters only with includeDead
    expect((await db.store.get(pending))?.status).toBe('PENDING');
    // The rows can be gone before the purge that removed them returns (MySQL deletes its history
    // first, then the command table), so its log line is waited for, not expected at once.
    await waitFor('the purge to log', () =>
      entries.some((e) => e.msg === 'asynccmd retention purged finished commands'),
    );
    // It keeps purging at its interval, not only at start.
    const before = counted.purges();
    await waitFor('another purge', () => counted.purges() > before);

    await runtime.stop({ closeStore: false });
    const stopped = counted.purges();
    const after = await finishedCommands();
    await sleep(300); // six intervals
    expect(counted.purges()).toBe(stopped);
    for (const id of after.done) expect((await db.store.get(id))?.status).toMatch(/SUCCESS|CANCELLED/);
  });
});
