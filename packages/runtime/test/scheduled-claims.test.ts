import { afterEach, describe, expect, it } from 'vitest';
import type { ClaimDueParams, ClaimRef, CommandStore } from '@asynccmd/core';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { AsyncCommands, createAsyncCommands, defineExecutor } from '../src/index.js';
import { openTempSqlite, type TempSqlite } from './ops/support.js';

type Types = { 't.job': { n: number } };

/** The store's claims and outcome writes, as sizes, in the order they were made. */
interface StoreCalls {
  readonly claimLimits: number[];
  readonly claimed: number[];
  readonly completes: number[];
}

/** `store` with its claimDue and complete counted; the real statements still run. */
function counted(store: CommandStore): StoreCalls {
  const calls: StoreCalls = { claimLimits: [], claimed: [], completes: [] };
  const claimDue = store.claimDue.bind(store);
  const complete = store.complete.bind(store);
  store.claimDue = async (params: ClaimDueParams) => {
    calls.claimLimits.push(params.limit);
    const rows = await claimDue(params);
    calls.claimed.push(rows.length);
    return rows;
  };
  store.complete = async (refs: readonly ClaimRef[]) => {
    calls.completes.push(refs.length);
    return complete(refs);
  };
  return calls;
}

async function until(condition: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(condition()).toBe(true);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let db: TempSqlite;

afterEach(async () => {
  await db?.dispose();
});

/** `count` PENDING commands of t.job, submitted in one transaction. */
async function backlog(store: CommandStore, count: number): Promise<void> {
  const submitter = new AsyncCommands<Types>({ store, executors: [], submitOnlyTypes: ['t.job'] });
  const items = Array.from({ length: count }, (_, i) => ({ type: 't.job' as const, payload: { n: i } }));
  await submitter.client.transaction((tx) => submitter.client.submitMany(tx, items));
}

describe('SCHEDULED claims by default (no scheduledBatchSize)', () => {
  it('claims a backlog of fast commands in batches that grow with it, runs them one at a time, and writes their outcomes per round', async () => {
    db = await openTempSqlite();
    const total = 3_000;
    await backlog(db.store, total);
    const calls = counted(db.store);
    const ran = new Map<number, number>();
    let running = 0;
    let overlapped = false;
    const job = defineExecutor<'t.job', { n: number }>({
      type: 't.job',
      execute: async ({ n }) => {
        overlapped ||= running > 0;
        running++;
        await Promise.resolve(); // a real await: the next must still wait for this one
        running--;
        ran.set(n, (ran.get(n) ?? 0) + 1);
      },
    });
    let succeeded = 0;
    const runtime = createAsyncCommands({
      store: db.store,
      executors: [job],
      pollIntervalMs: 600_000,
    });
    runtime.on((e) => {
      if (e.kind === 'succeeded') succeeded++;
    });
    expect(runtime.state().scheduler.scheduledClaim).toBe(1);
    runtime.start();
    await until(() => succeeded === total);
    const claimAtEnd = runtime.state().scheduler.scheduledClaim;
    await runtime.stop();

    expect(overlapped).toBe(false); // SCHEDULED: one after another
    expect(ran.size).toBe(total);
    expect([...ran.values()].every((times) => times === 1)).toBe(true);
    expect(calls.claimLimits[0]).toBe(1); // nothing measured yet: only what it runs now
    // Once it has measured a command and a claim, a claim covers far more than the old fixed 10…
    expect(Math.max(...calls.claimLimits)).toBeGreaterThan(50);
    expect(Math.max(...calls.claimLimits)).toBeLessThanOrEqual(500);
    expect(claimAtEnd).toBeGreaterThan(50); // what the runtime's state reports
    // …and each round's outcomes go out together: about one write per claim, not one per command.
    expect(calls.completes.reduce((a, b) => a + b, 0)).toBe(total);
    expect(calls.completes.length).toBeLessThanOrEqual(calls.claimed.filter((n) => n > 0).length);
    expect(calls.completes.length).toBeLessThan(total / 20);
  });

  it('claims slow commands one at a time, so another instance can start the rest at once', async () => {
    db = await openTempSqlite();
    await backlog(db.store, 8);
    const other = createSqliteStore({ filename: db.file });
    try {
      const runs: { instance: string; at: number }[] = [];
      const instance = (name: string, store: CommandStore) => {
        const calls = counted(store);
        const job = defineExecutor<'t.job', { n: number }>({
          type: 't.job',
          execute: async () => {
            runs.push({ instance: name, at: Date.now() });
            await sleep(150);
          },
        });
        const runtime = createAsyncCommands({ store, executors: [job], pollIntervalMs: 50 });
        return { runtime, calls };
      };
      const a = instance('a', db.store);
      const b = instance('b', other);
      a.runtime.start();
      b.runtime.start();
      await until(() => runs.length === 8);
      await Promise.all([a.runtime.stop(), b.runtime.stop()]);

      // 150 ms commands against a claim of a millisecond or so: each claim takes only the one it runs.
      for (const { calls } of [a, b]) expect(calls.claimLimits.every((limit) => limit === 1)).toBe(true);
      const byA = runs.filter((r) => r.instance === 'a').length;
      expect(byA).toBeGreaterThanOrEqual(2);
      expect(8 - byA).toBeGreaterThanOrEqual(2);
    } finally {
      await other.close();
    }
  });

  it('keeps a fixed scheduledBatchSize as given', async () => {
    db = await openTempSqlite();
    await backlog(db.store, 40);
    const calls = counted(db.store);
    let done = 0;
    const job = defineExecutor<'t.job', { n: number }>({ type: 't.job', execute: () => void done++ });
    const runtime = createAsyncCommands({
      store: db.store,
      executors: [job],
      pollIntervalMs: 600_000,
      scheduledBatchSize: 7,
    });
    runtime.start();
    await until(() => done === 40);
    await runtime.stop();
    expect(new Set(calls.claimLimits)).toEqual(new Set([7]));
    expect(runtime.state().scheduler.scheduledClaim).toBe(7);
  });
});
