import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { silentLogger, type CommandEvent, type CommandId, type CommandStore } from '@asynccmd/core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { CommandEvents } from '../../src/command-events.js';
import { createAsyncCommands } from '../../src/create-async-commands.js';
import { purgeFinished, Retention, type RetentionOptions } from '../../src/services/retention.js';
import { StoreOutage } from '../../src/store-outage.js';
import {
  makeDead,
  openTempSqlite,
  recordingLogger,
  submit,
  succeed,
  type TempSqlite,
} from '../ops/support.js';

/** Lets every queued promise callback run (the service schedules its next run when a run settles). */
const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Until `condition` holds, yielding with setImmediate, which the fake timers below leave real. */
async function until(what: string, condition: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 20_000; i++) {
    if (await condition()) return;
    await settled();
  }
  throw new Error(`never happened: ${what}`);
}

const PURGED = 'asynccmd retention purged finished commands';

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
  afterEach(() => {
    vi.useRealTimers();
  });

  /** n finished commands plus one DEAD and one PENDING; returns their ids once the clock has passed them. */
  async function finished(n: number, type = 'retention.t') {
    const done: CommandId[] = [];
    for (let i = 0; i < n; i++) done.push((await succeed(db.store, await submit(db.store, type))).id);
    const cancelled = await submit(db.store, type);
    await db.store.cancel(cancelled);
    const dead = await makeDead(db.store, type);
    const pending = await submit(db.store, type);
    const last = (await db.store.get(dead))?.finishedAt ?? new Date();
    await until('the database clock passes the last finish', async () => (await db.store.now()) > last);
    return { done: [...done, cancelled], dead, pending };
  }

  /** The retention service of a runtime, on `store`, reporting through `logger` and `events`. */
  function retention(
    store: CommandStore,
    options: RetentionOptions,
    logger = recordingLogger(),
    events = new CommandEvents(silentLogger),
  ) {
    return {
      service: new Retention(store, new StoreOutage(events, logger.logger), logger.logger, options),
      logger,
    };
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
    expect(() =>
      createAsyncCommands({ store: db.store, executors: [], retention: { olderThanMs: 0, intervalMs: 0 } }),
    ).toThrow(/`retention` intervalMs/);
  });

  it('the retention service runs on start, then at each interval, and stops cleanly', async () => {
    await finished(3);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const { service, logger } = retention(db.store, { olderThanMs: 0, batchSize: 10, intervalMs: 60_000 });
    const runs = () => logger.entries.filter((e) => e.msg === PURGED).map((e) => e.obj);

    service.start();
    expect(service.started).toBe(true);
    vi.advanceTimersByTime(0);
    await until('the first purge', () => runs().length === 1);
    expect(runs()[0]?.['deleted']).toBe(4);
    await settled();
    expect(vi.getTimerCount()).toBe(1); // the next run, an interval on

    const { dead } = await finished(1);
    vi.advanceTimersByTime(59_000);
    await settled();
    expect(runs()).toHaveLength(1);
    vi.advanceTimersByTime(1_000);
    await until('the second purge', () => runs().length === 2);
    expect(runs()[1]?.['deleted']).toBe(2);
    expect((await db.store.get(dead))?.status).toBe('DEAD');
    await settled();
    expect(vi.getTimerCount()).toBe(1);

    await service.stop();
    expect(service.started).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('the retention service reports a failed run as a store outage and keeps its schedule', async () => {
    const closed = createSqliteStore({ filename: db.file });
    await closed.close();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const events = new CommandEvents(silentLogger);
    const errors: CommandEvent[] = [];
    events.on((e) => e.kind === 'store-error' && errors.push(e));
    const { service, logger } = retention(
      closed,
      { olderThanMs: 0, intervalMs: 1_000 },
      recordingLogger(),
      events,
    );
    service.start();
    vi.advanceTimersByTime(0);
    await until('the first failure', () => errors.length === 1);
    expect(errors[0]).toMatchObject({ kind: 'store-error', operation: 'purge', error: expect.any(Error) });
    await settled();
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(5_000);
    await until('the second failure', () => errors.length === 2);
    expect(logger.entries.filter((e) => e.level === 'warn')).toHaveLength(1); // once per outage
    await settled();
    expect(vi.getTimerCount()).toBe(1);
    await service.stop();
    expect(vi.getTimerCount()).toBe(0);
  });
});
