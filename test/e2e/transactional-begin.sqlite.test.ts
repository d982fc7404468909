import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { immediateBackoff, type CommandEvent } from '@asynccmd/core';
import { createSqliteStore, type SqliteDatabase } from '@asynccmd/adapter-sqlite';
import { createAsyncCommands, defineTransactionalExecutor } from '@asynccmd/runtime';

/**
 * A transactional attempt whose transaction cannot be opened (here: another connection holds
 * SQLite's write lock past the busy timeout) never ran: it goes back to PENDING uncounted and runs
 * again — also when it was to be the first of a shared transaction.
 */
describe('a transactional attempt whose transaction cannot begin', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it('is put back uncounted and commits once later, with the attempts queued behind it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-begin-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'c.db');
    const store = createSqliteStore({ filename: file, busyTimeoutMs: 100 });
    await store.migrate();
    store.db.exec('CREATE TABLE effect (command_id TEXT NOT NULL)');
    const other = new Database(file);
    cleanups.push(() => void other.close());
    const executor = defineTransactionalExecutor<SqliteDatabase>()<'tx.begin', { n: number }>({
      type: 'tx.begin',
      transactional: true,
      mode: 'ASYNC_POOL',
      // Short, so a release the held lock refused is taken back soon by the hung reclaimer.
      leaseMs: 2_000,
      execute(_payload, ctx) {
        ctx.tx.prepare('INSERT INTO effect (command_id) VALUES (?)').run(ctx.id);
      },
    });
    const runtime = createAsyncCommands({
      store,
      executors: [executor],
      pollIntervalMs: 20,
      backoff: immediateBackoff,
      sharedPool: { concurrency: 1, queueSize: 20 },
    });
    cleanups.push(() => runtime.stop({ timeoutMs: 2_000 }));
    const ids = await runtime.client.transaction(async (tx) =>
      runtime.client.submitMany(
        tx,
        Array.from({ length: 5 }, (_, n) => ({ type: 'tx.begin' as const, payload: { n } })),
      ),
    );
    const events: CommandEvent[] = [];
    let locked = false;
    runtime.on((e) => {
      events.push(e);
      // The first start: the write lock goes to another connection before the attempt's BEGIN.
      if (e.kind === 'started' && !locked) {
        locked = true;
        other.exec('BEGIN IMMEDIATE');
        setTimeout(() => other.exec('ROLLBACK'), 400);
      }
    });
    runtime.start();
    const until = Date.now() + 15_000;
    while ((await store.getMany(ids)).some((c) => c.status !== 'SUCCESS')) {
      if (Date.now() > until) throw new Error('not every command committed');
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(locked).toBe(true);
    const done = await store.getMany(ids);
    expect(done.map((c) => c.retryCount)).toEqual([0, 0, 0, 0, 0]);
    const rows = store.db.prepare('SELECT command_id AS id FROM effect').all() as { id: string }[];
    expect(rows.map((r) => r.id).sort()).toEqual([...ids].sort());
    expect(events.filter((e) => e.kind === 'released').length).toBeGreaterThan(0);
  });
});
