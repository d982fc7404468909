import { createSqliteStore, type SqliteCommandStore } from '@asynccmd/adapter-sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { createAsyncCommands, defineExecutor, type AsyncCommands } from '../src/index.js';
import { openTempSqlite, type TempSqlite } from './ops/support.js';

/**
 * A claim queued behind a command that holds the event loop (or behind a slow claim round, or a
 * heartbeat held up) can have its lease run out before it starts. Started then, it could be
 * reclaimed and run elsewhere while it runs here: it must be renewed first, or never started.
 */
const LEASE_MS = 300;

let db: TempSqlite;
let other: SqliteCommandStore | null = null;
let runtime: Pick<AsyncCommands, 'start' | 'stop'> | null = null;

afterEach(async () => {
  await runtime?.stop();
  runtime = null;
  await other?.close();
  other = null;
  await db?.dispose();
});

function blockFor(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end);
}

/**
 * One pool slot with its default queue, so the second command waits in the queue while the first
 * runs; `first` is what the first command does, the others only count their starts.
 */
function drainTwo(first: () => Promise<void> | void) {
  const starts = new Map<string, number>();
  const commands = createAsyncCommands({
    store: db.store,
    leaseMs: LEASE_MS,
    heartbeatIntervalMs: 75,
    pollIntervalMs: 20,
    reclaimIntervalMs: 20,
    sharedPool: { concurrency: 1, queueSize: 1 },
    executors: [
      defineExecutor<'t.lease', { first: boolean }>({
        type: 't.lease',
        mode: 'ASYNC_POOL',
        execute: async ({ first: isFirst }, ctx) => {
          starts.set(ctx.id, (starts.get(ctx.id) ?? 0) + 1);
          if (isFirst && starts.get(ctx.id) === 1) await first();
        },
      }),
    ],
  });
  const submit = async () => {
    await commands.client.transaction(async (_tx, submit) => {
      await submit('t.lease', { first: true });
      await submit('t.lease', { first: false });
    });
  };
  runtime = commands;
  return { starts, submit };
}

async function settled(ids: () => Promise<number>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((await ids()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

async function openCount(): Promise<number> {
  const { counts } = await db.store.stats(await db.store.now());
  return counts
    .filter((c) => c.status === 'PENDING' || c.status === 'RUNNING')
    .reduce((n, c) => n + c.count, 0);
}

describe('a claim whose lease may have lapsed before it starts', () => {
  it('is renewed before it starts: a queued command outlived by its lease runs once', async () => {
    db = await openTempSqlite();
    // The first command holds the event loop past the second's lease: no heartbeat can run. Then
    // the second would start at once, before the timers (the reclaimer's first) get their turn.
    const { starts, submit } = drainTwo(() => blockFor(3 * LEASE_MS));
    runtime!.start();
    await submit();
    await settled(openCount);
    expect([...starts.values()]).toEqual([1, 1]);
    const { counts } = await db.store.stats(await db.store.now());
    expect(counts.find((c) => c.status === 'SUCCESS')?.count).toBe(2);
  });

  it('is never started once the renewal finds it reclaimed: it runs once, under the new claim', async () => {
    db = await openTempSqlite();
    other = createSqliteStore({ filename: db.file });
    // While the first runs, both leases lapse and another instance reclaims both. The first ran
    // on past its lease (it will run again: at-least-once); the second, queued, must not start
    // under the claim it has lost.
    let reclaimed: string[] = [];
    const { starts, submit } = drainTwo(async () => {
      blockFor(3 * LEASE_MS);
      reclaimed = (await other!.reclaimHung({ limit: 10, maxRescues: 5 })).map((c) => c.id);
    });
    runtime!.start();
    await submit();
    await settled(openCount);
    expect(reclaimed).toEqual(['1', '2']);
    expect(starts.get('2')).toBe(1);
    const { counts } = await db.store.stats(await db.store.now());
    expect(counts.find((c) => c.status === 'SUCCESS')?.count).toBe(2);
  });
});
