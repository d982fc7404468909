import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import type { CommandId } from '@asynccmd/core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { purgeFinished, RetentionJob, type PurgeResult, type Timers } from '../../src/services/retention.js';
import {
  makeDead,
  openTempSqlite,
  submit,
  succeed,
  untilDatabaseClockPasses,
  type TempSqlite,
} from '../ops/support.js';

/** Lets every queued promise callback run (the job schedules its next run when a run settles). */
const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('retention on SQLite', () => {
  let db: TempSqlite;
  beforeAll(async () => {
    db = await openTempSqlite();
  });
  afterAll(async () => {
    await db.dispose();
  });
  beforeEach(async () => {
    // Each test starts from an empty table.
    await purgeFinished(db.store, { olderThanMs: 0, includeDead: true });
  });

  /** n finished commands plus one DEAD and one PENDING; returns their ids once the clock has passed them. */
  async function finished(n: number, type = 'retention.t') {
    const done: CommandId[] = [];
    for (let i = 0; i < n; i++) done.push((await succeed(db.store, await submit(db.store, type))).id);
    const cancelled = await submit(db.store, type);
    await db.store.cancel(cancelled);
    const dead = await makeDead(db.store, type);
    const pending = await submit(db.store, type);
    await untilDatabaseClockPasses(db.store, (await db.store.get(dead))?.finishedAt ?? new Date());
    return { done: [...done, cancelled], dead, pending };
  }

  it('purges SUCCESS and CANCELLED in bounded batches until done, keeping DEAD and unfinished', async () => {
    const { done, dead, pending } = await finished(5);
    const r = await purgeFinished(db.store, { olderThanMs: 0, batchSize: 2 });
    expect(r).toMatchObject({ deleted: 6, batches: 4 });
    for (const id of done) expect(await db.store.get(id)).toBeNull();
    expect((await db.store.get(dead))?.status).toBe('DEAD');
    expect((await db.store.get(pending))?.status).toBe('PENDING');

    const withDead = await purgeFinished(db.store, { olderThanMs: 0, includeDead: true });
    expect(withDead).toMatchObject({ deleted: 1, batches: 1 });
    expect(await db.store.get(dead)).toBeNull();
    expect((await db.store.get(pending))?.status).toBe('PENDING');
  });

  it('keeps rows that finished more recently than the cutoff', async () => {
    const { done } = await finished(2);
    const r = await purgeFinished(db.store, { olderThanMs: 3_600_000, includeDead: true });
    expect(r.deleted).toBe(0);
    expect(r.olderThan.getTime()).toBeLessThan(Date.now() - 3_000_000);
    for (const id of done) expect((await db.store.get(id))?.status).toMatch(/SUCCESS|CANCELLED/);
  });

  it('refuses nonsense options with INVALID_ARGUMENT', async () => {
    await expect(purgeFinished(db.store, { olderThanMs: -1 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(purgeFinished(db.store, { olderThanMs: 0, batchSize: 0 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(() => new RetentionJob({ store: db.store, olderThanMs: 0, intervalMs: 0 })).toThrow(/intervalMs/);
  });

  it('RetentionJob runs on start, then at each interval on the injected timers, and stops cleanly', async () => {
    const scheduled: { fn: () => void; ms: number; handle: number }[] = [];
    const cleared: unknown[] = [];
    const timers: Timers = {
      setTimeout: (fn, ms) => {
        const handle = scheduled.length + 1;
        scheduled.push({ fn, ms, handle });
        return handle;
      },
      clearTimeout: (handle) => cleared.push(handle),
    };
    const runs: PurgeResult[] = [];
    let notify: () => void = () => undefined;
    const nextRun = () => new Promise<void>((resolve) => (notify = resolve));
    const job = new RetentionJob({
      store: db.store,
      olderThanMs: 0,
      batchSize: 10,
      intervalMs: 60_000,
      timers,
      onRun: ({ result }) => {
        if (result) runs.push(result);
        notify();
      },
    });

    await finished(3);
    let ran = nextRun();
    job.start();
    expect(job.isRunning).toBe(true);
    await ran;
    expect(runs[0]?.deleted).toBe(4);
    await settled();
    expect(scheduled.map((s) => s.ms)).toEqual([60_000]);

    const { dead } = await finished(1);
    ran = nextRun();
    scheduled[0]?.fn();
    await ran;
    expect(runs[1]?.deleted).toBe(2);
    expect((await db.store.get(dead))?.status).toBe('DEAD');
    await settled();
    expect(scheduled).toHaveLength(2);

    await job.stop();
    expect(job.isRunning).toBe(false);
    expect(cleared).toEqual([2]);
    expect(scheduled).toHaveLength(2);
  });

  it('RetentionJob reports a failed run and keeps its schedule', async () => {
    const closed = createSqliteStore({ filename: db.file });
    await closed.close();
    const scheduled: (() => void)[] = [];
    const errors: unknown[] = [];
    let notify: () => void = () => undefined;
    const ran = new Promise<void>((resolve) => (notify = resolve));
    const job = new RetentionJob({
      store: closed,
      olderThanMs: 0,
      intervalMs: 1_000,
      timers: { setTimeout: (fn) => scheduled.push(fn), clearTimeout: () => undefined },
      onRun: ({ error }) => {
        errors.push(error);
        notify();
      },
    });
    job.start();
    await ran;
    await settled();
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(Error);
    expect(scheduled).toHaveLength(1);
    await job.stop();
  });
});
