import { afterEach, describe, expect, it } from 'vitest';
import type { Clock, CommandRecord, CommandStore } from '@asynccmd/core';
import {
  createAsyncCommands,
  defineExecutor,
  startAdminServer,
  TICK_HEADER,
  type AsyncCommands,
  type CatchUpPolicy,
  type RecurringSchedule,
  type RecurringTick,
} from '@asynccmd/runtime';
// The runtime's tuning, not its public surface: read from its source.
import { RUN_TIME_SCHEDULES_REFRESH_MS } from '../../packages/runtime/src/recurring/recurring-service.js';
import { cli } from '../../packages/cli/test/run.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { recorded } from '../../packages/cli/test/worker.suite.js';
import { spawnWorker, WORKER_FIXTURES, type WorkerProcess } from '../../packages/cli/test/worker-process.js';
import type { RuntimeHarness, RuntimeHarnessFactory } from './harness.js';

/** Polls `condition` every 20 ms; fails with `what` after `timeoutMs`. */
async function waitFor(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 20_000,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A clock the test moves by hand. */
function manualClock(start: number): Clock & { set(ms: number): void } {
  let now = start;
  return { now: () => new Date(now), set: (ms) => (now = ms) };
}

async function allOfType(store: CommandStore, type: string): Promise<CommandRecord[]> {
  const items: CommandRecord[] = [];
  let cursor: string | null = null;
  do {
    const page = await store.list({ type, limit: 1000, ...(cursor === null ? {} : { cursor }) });
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor !== null);
  return items;
}

const tickTimes = (rows: readonly CommandRecord[]): number[] =>
  rows.map((r) => Date.parse(r.headers[TICK_HEADER] ?? 'missing')).sort((a, b) => a - b);

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/**
 * Recurring schedules end to end: real stores on their own connections, real runtimes, real time
 * where the claim is about time going by (once per tick), a hand-moved clock where it is about a
 * downtime (catch-up).
 */
export function describeRecurringE2E<Tx>(name: string, harnessFactory: RuntimeHarnessFactory<Tx>): void {
  describe(`recurring schedules end to end on ${name}`, () => {
    let harness: RuntimeHarness<Tx> | null = null;
    const cleanups: (() => Promise<void>)[] = [];
    let seq = 0;

    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
      await harness?.dispose();
      harness = null;
    });

    async function openStore(): Promise<CommandStore<Tx>> {
      harness ??= await harnessFactory(`rec_${process.pid}_${++seq}_${Math.floor(Math.random() * 1e6)}`);
      return harness.openStore();
    }

    /** A runtime on a store connection of its own, running `executors` and `recurring`. */
    async function instance(
      recurring: readonly RecurringSchedule[],
      seen: { tick: RecurringTick | null; payload: unknown }[],
      clock?: Clock,
    ): Promise<{ runtime: AsyncCommands; store: CommandStore<Tx> }> {
      const store = await openStore();
      const executor = defineExecutor<'rec.tick', unknown>({
        type: 'rec.tick',
        execute(payload, ctx) {
          seen.push({ tick: ctx.tick, payload });
        },
      });
      const runtime = createAsyncCommands({
        store,
        executors: [executor],
        pollIntervalMs: 50,
        recurring,
        ...(clock ? { clock } : {}),
      });
      cleanups.push(() => runtime.stop({ timeoutMs: 2_000, closeStore: false }));
      runtime.start();
      return { runtime: runtime as unknown as AsyncCommands, store };
    }

    it('two instances running the same every-second schedule enqueue exactly one command per tick', async () => {
      const schedule: RecurringSchedule = {
        name: 'every-second',
        cron: '* * * * * *',
        type: 'rec.tick',
        payloadFor: (tick) => ({ period: tick.toISOString() }),
      };
      const seen: { tick: RecurringTick | null; payload: unknown }[] = [];
      const a = await instance([schedule], seen);
      await instance([schedule], seen);
      await waitFor('5 ticks executed', () => seen.length >= 5);
      await Promise.all(cleanups.splice(0).map((c) => c()));
      const rows = await allOfType(a.store, 'rec.tick');
      const ticks = tickTimes(rows);
      expect(ticks.length).toBeGreaterThanOrEqual(5);
      // Consecutive seconds, each once: none missing, none twice.
      const first = ticks[0] ?? 0;
      expect(ticks).toEqual(ticks.map((_, i) => first + i * 1000));
      // Each executed once, knowing its period from the tick, which its payload repeats.
      const executed = seen.map((s) => s.tick?.at.getTime() ?? NaN).sort((x, y) => x - y);
      expect(new Set(executed).size).toBe(executed.length);
      for (const s of seen) {
        expect(s.tick?.schedule).toBe('every-second');
        expect(s.payload).toEqual({ period: s.tick?.at.toISOString() });
      }
      for (const r of rows) expect(r.nextRunAt.getTime()).toBe(Date.parse(r.headers[TICK_HEADER] ?? ''));
      const [view] = await a.runtime.schedules.list();
      expect(view?.lastTick).toBe(new Date(ticks.at(-1) ?? 0).toISOString());
    });

    /** `asynccmd worker` processes running the fixture module's `worker.tick` schedule on this harness. */
    async function workers(
      count: number,
      env: Record<string, string>,
      record: string,
    ): Promise<WorkerProcess[]> {
      await openStore();
      const spawned = Array.from({ length: count }, () =>
        spawnWorker(
          [
            ...(harness?.cliArgs ?? []),
            'worker',
            '--executors',
            join(WORKER_FIXTURES, 'worker-executors.mjs'),
            '--shutdown-timeout',
            '10s',
          ],
          { ASYNCCMD_TEST_RECORD: record, ...env },
        ),
      );
      cleanups.push(async () => {
        for (const w of spawned) w.child.kill('SIGKILL');
      });
      await Promise.all(spawned.map((w) => w.started));
      return spawned;
    }

    /** A file for the executions the fixture's executors record, removed after the test. */
    function recordFile(): string {
      const dir = mkdtempSync(join(tmpdir(), 'asynccmd-rec-'));
      cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
      return join(dir, 'executed.jsonl');
    }

    /** SIGTERM to each; every one exits 0 (a graceful stop) with nothing on stderr. */
    async function stopAll(spawned: readonly WorkerProcess[]): Promise<void> {
      for (const w of spawned) w.child.kill('SIGTERM');
      expect(await Promise.all(spawned.map((w) => w.exited))).toEqual(spawned.map(() => 0));
      for (const w of spawned) expect(w.stderr()).toBe('');
    }

    it('three worker processes running the same every-second schedule for 20 s: one command per tick, each run once', async () => {
      const store = await openStore();
      const record = recordFile();
      const spawned = await workers(3, { ASYNCCMD_TEST_CRON: '* * * * * *' }, record);
      const ran = () => recorded(record).filter((r) => r.type === 'worker.tick');
      await waitFor('20 s of ticks executed', () => ran().length >= 20, 60_000);
      await stopAll(spawned);

      const rows = await allOfType(store, 'worker.tick');
      const ticks = tickTimes(rows);
      expect(ticks.length).toBeGreaterThanOrEqual(20);
      // Consecutive seconds, each once: none missing, none twice.
      const first = ticks[0] ?? 0;
      expect(ticks).toEqual(ticks.map((_, i) => first + i * 1000));
      // Each command ran once (recorded by the executor, outside the queue table), for its own tick.
      const executions = ran();
      expect(new Set(executions.map((e) => e.id)).size).toBe(executions.length);
      const succeeded = rows.filter((r) => r.status === 'SUCCESS');
      expect(executions.map((e) => e.id).sort()).toEqual(succeeded.map((r) => r.id).sort());
      for (const e of executions) {
        const row = rows.find((r) => r.id === e.id);
        expect(e.tick).toBe(row?.headers[TICK_HEADER]);
      }
      // What did not run before the stop is waiting for the next worker, not stuck RUNNING.
      expect(rows.every((r) => r.status === 'SUCCESS' || r.status === 'PENDING')).toBe(true);
    }, 90_000);

    const PAST = Date.UTC(2025, 0, 1, 0, 0, 0);
    it('worker processes restarted after an hour with every instance down follow catchUp: 3', async () => {
      const store = await openStore();
      const schedule = { ASYNCCMD_TEST_CRON: '0 * * * * *', ASYNCCMD_TEST_CATCH_UP: '3' };
      const record = recordFile();
      const before = await workers(
        2,
        { ...schedule, ASYNCCMD_TEST_CLOCK_START: String(PAST - 1_000) },
        record,
      );
      await waitFor('the tick at T0', async () =>
        tickTimes(await allOfType(store, 'worker.tick')).includes(PAST),
      );
      await stopAll(before);
      // Back an hour later, 5 s after the hour's tick.
      const after = await workers(
        3,
        { ...schedule, ASYNCCMD_TEST_CLOCK_START: String(PAST + HOUR + 5_000) },
        record,
      );
      await waitFor('the tick of the hour', async () =>
        tickTimes(await allOfType(store, 'worker.tick')).includes(PAST + HOUR),
      );
      await waitFor('every tick executed', () => recorded(record).length === 5);
      await stopAll(after);
      const expected = [PAST, PAST + 57 * MINUTE, PAST + 58 * MINUTE, PAST + 59 * MINUTE, PAST + HOUR];
      expect(tickTimes(await allOfType(store, 'worker.tick'))).toEqual(expected);
      const executed = recorded(record).map((e) => Date.parse(e.tick ?? ''));
      expect(executed.sort((a, b) => a - b)).toEqual(expected);
    }, 60_000);

    const T0 = Date.UTC(2031, 0, 1, 0, 0, 0);
    it.each<[CatchUpPolicy, number[]]>([
      ['none', [T0, T0 + HOUR]],
      ['latest', [T0, T0 + 59 * MINUTE, T0 + HOUR]],
      [3, [T0, T0 + 57 * MINUTE, T0 + 58 * MINUTE, T0 + 59 * MINUTE, T0 + HOUR]],
    ])(
      'after an hour with every instance down, catchUp %s enqueues what it says',
      async (catchUp, expected) => {
        const schedule: RecurringSchedule = {
          name: 'minutely',
          cron: '0 * * * * *',
          type: 'rec.tick',
          catchUp,
        };
        const seen: { tick: RecurringTick | null; payload: unknown }[] = [];
        const clock = manualClock(T0 - 100);
        const before = await instance([schedule], seen, clock);
        await waitFor(
          'the schedule declared',
          async () => (await before.runtime.schedules.list()).length === 1,
        );
        clock.set(T0 + 100);
        await waitFor(
          'the tick at T0',
          async () => (await before.runtime.schedules.get('minutely')).lastTick !== null,
        );
        await Promise.all(cleanups.splice(0).map((c) => c()));
        // Every instance was down for an hour; one comes back 5 s after the hour's tick.
        const after = await instance([schedule], seen, manualClock(T0 + HOUR + 5_000));
        await waitFor(
          'the tick of the hour',
          async () =>
            (await after.runtime.schedules.get('minutely')).lastTick === new Date(T0 + HOUR).toISOString(),
        );
        expect(tickTimes(await allOfType(after.store, 'rec.tick'))).toEqual(expected);
        const view = await after.runtime.schedules.get('minutely');
        expect(view.nextTick).toBe(new Date(T0 + HOUR + MINUTE).toISOString());
      },
    );

    it('a schedule added at run time ticks once per tick on the instances that run its type; removing it stops them all', async () => {
      const seen: { tick: RecurringTick | null; payload: unknown }[] = [];
      const start = Date.UTC(2031, 8, 1, 6, 0, 0);
      const clock = manualClock(start - 500);
      // B and C run rec.tick and declare nothing in code; A only submits it (and has no schedule loop).
      const b = await instance([], seen, clock);
      await instance([], seen, clock);
      const a = createAsyncCommands({
        store: await openStore(),
        executors: [],
        submitOnlyTypes: ['rec.tick'],
        clock,
      });
      cleanups.push(() => a.stop({ timeoutMs: 2_000, closeStore: false }));
      a.start();

      const added = await a.schedules.add({
        name: 'added-live',
        cron: '* * * * * *',
        type: 'rec.tick',
        payload: { fixed: true },
        catchUp: 'latest',
      });
      expect(added).toMatchObject({
        name: 'added-live',
        paused: false,
        lastTick: null,
        nextTick: new Date(start).toISOString(),
      });
      // B and C read the table again RUN_TIME_SCHEDULES_REFRESH_MS after their last read.
      clock.set(start + RUN_TIME_SCHEDULES_REFRESH_MS + 500);
      const expected = Array.from(
        { length: RUN_TIME_SCHEDULES_REFRESH_MS / 1000 + 1 },
        (_, i) => start + i * 1000,
      );
      await waitFor(
        'the ticks since the add',
        async () => (await allOfType(b.store, 'rec.tick')).length === expected.length,
      );
      expect(tickTimes(await allOfType(b.store, 'rec.tick'))).toEqual(expected);
      await waitFor('the ticks executed', () => seen.length === expected.length);
      for (const s of seen)
        expect(s).toMatchObject({ tick: { schedule: 'added-live' }, payload: { fixed: true } });

      // Typed refusals.
      const refused = async (p: Promise<unknown>) =>
        p.then(
          () => 'accepted',
          (e: { code?: string }) => e.code,
        );
      expect(
        await refused(a.schedules.add({ name: 'added-live', cron: '* * * * *', type: 'rec.tick' })),
      ).toBe('SCHEDULE_EXISTS');
      expect(await refused(a.schedules.add({ name: 'x', cron: '61 * * * *', type: 'rec.tick' }))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(
        await refused(
          a.schedules.add({ name: 'x', cron: '* * * * *', timezone: 'Mars/Base', type: 'rec.tick' }),
        ),
      ).toBe('INVALID_ARGUMENT');
      expect(await refused(a.schedules.add({ name: 'x', cron: '* * * * *', type: 'rec.unknown' }))).toBe(
        'UNKNOWN_COMMAND_TYPE',
      );
      expect(await refused(a.schedules.add({ name: 'bad name!', cron: '* * * * *', type: 'rec.tick' }))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(await refused(a.schedules.remove('no-such'))).toBe('NOT_FOUND');
      await b.store.schedules?.declare(
        [{ name: 'in-code', type: 'rec.other', cron: '0 0 * * *', timezone: null }],
        clock.now(),
      );
      expect(await refused(a.schedules.remove('in-code'))).toBe('SCHEDULE_DECLARED_IN_CODE');

      // Removed through A: B and C find its row gone at their next tick and enqueue nothing more.
      expect(await a.schedules.remove('added-live')).toEqual({ name: 'added-live', removed: true });
      clock.set(start + RUN_TIME_SCHEDULES_REFRESH_MS + 3_500);
      await new Promise((r) => setTimeout(r, 1_000));
      expect(await allOfType(b.store, 'rec.tick')).toHaveLength(expected.length);
      expect((await a.schedules.list()).map((v) => v.name)).toEqual(['in-code']);

      // The CLI and the admin HTTP API add and remove the same way.
      const added2 = await cli([
        ...(harness?.cliArgs ?? []),
        'schedules',
        'add',
        'from-cli',
        '--cron',
        '0 0 * * * *',
        '--type',
        'rec.tick',
        '--payload',
        '{"via":"cli"}',
        '--catch-up',
        '2',
        '--json',
      ]);
      expect(added2.err).toBe('');
      expect(JSON.parse(added2.out)).toMatchObject({
        name: 'from-cli',
        cron: '0 0 * * * *',
        type: 'rec.tick',
        origin: 'runtime',
      });
      expect((await b.store.schedules?.get('from-cli'))?.runTime).toEqual({
        payloadJson: '{"via":"cli"}',
        catchUp: 2,
        maxRetry: null,
      });
      const again = await cli([
        ...(harness?.cliArgs ?? []),
        'schedules',
        'add',
        'from-cli',
        '--cron',
        '* * * * *',
        '--type',
        'rec.tick',
      ]);
      expect(again).toMatchObject({ code: 1, err: expect.stringContaining('exists already') });
      expect(
        (
          await cli([
            ...(harness?.cliArgs ?? []),
            'schedules',
            'add',
            'y',
            '--cron',
            'never',
            '--type',
            'rec.tick',
          ])
        ).code,
      ).toBe(2);
      expect(await cli([...(harness?.cliArgs ?? []), 'schedules', 'remove', 'from-cli'])).toMatchObject({
        code: 0,
        out: 'schedule from-cli removed\n',
      });

      const server = await startAdminServer({
        store: b.store,
        token: 'secret-token-for-tests',
        scheduleTypes: ['rec.tick'],
      });
      cleanups.push(() => server.close());
      const post = (path: string, body: unknown) =>
        fetch(`${server.url}${path}`, {
          method: 'POST',
          headers: { authorization: 'Bearer secret-token-for-tests', 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const created = await post('/schedules/from-http/add', {
        cron: '*/10 * * * * *',
        type: 'rec.tick',
        payload: [1],
      });
      expect(created.status).toBe(201);
      expect(await created.json()).toMatchObject({ name: 'from-http', cron: '*/10 * * * * *' });
      expect((await post('/schedules/from-http/add', { cron: '* * * * *', type: 'rec.tick' })).status).toBe(
        409,
      );
      const unknown = await post('/schedules/other/add', { cron: '* * * * *', type: 'rec.unknown' });
      expect(unknown.status).toBe(400);
      expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('UNKNOWN_COMMAND_TYPE');
      expect((await post('/schedules/in-code/remove', {})).status).toBe(409);
      const removed = await post('/schedules/from-http/remove', {});
      expect(removed.status).toBe(200);
      expect(await removed.json()).toEqual({ name: 'from-http', removed: true });
      expect((await post('/schedules/from-http/remove', {})).status).toBe(404);
    });

    it('pause and resume, through the runtime and the admin HTTP API, hold for every instance', async () => {
      const schedule: RecurringSchedule = { name: 'paused-one', cron: '* * * * * *', type: 'rec.tick' };
      const seen: { tick: RecurringTick | null; payload: unknown }[] = [];
      const start = Date.UTC(2031, 5, 1, 12, 0, 0);
      const clock = manualClock(start - 500);
      const a = await instance([schedule], seen, clock);
      const b = await instance([schedule], seen, clock);
      await waitFor('declared', async () => (await a.runtime.schedules.list()).length === 1);
      clock.set(start + 2_500);
      await waitFor(
        'ticks up to start + 2 s',
        async () => (await allOfType(a.store, 'rec.tick')).length === 3,
      );

      // Paused through one instance: the other stops too.
      expect((await a.runtime.schedules.pause('paused-one')).paused).toBe(true);
      expect((await b.runtime.schedules.get('paused-one')).paused).toBe(true);
      expect((await b.runtime.schedules.get('paused-one')).nextTick).toBeNull();
      clock.set(start + 6_500);
      // Several looks of both instances go by (each looks every 250 ms): nothing is enqueued.
      await new Promise((r) => setTimeout(r, 1_000));
      expect(await allOfType(a.store, 'rec.tick')).toHaveLength(3);
      // Resumed at start + 6.5 s: the ticks of the pause are skipped, the next ones run.
      await b.runtime.schedules.resume('paused-one');
      clock.set(start + 8_500);
      await waitFor(
        'ticks after the resume',
        async () => (await allOfType(a.store, 'rec.tick')).length === 5,
      );
      expect(tickTimes(await allOfType(a.store, 'rec.tick'))).toEqual(
        [0, 1000, 2000, 7000, 8000].map((d) => start + d),
      );

      // The admin HTTP API: same auth, JSON and method rules as the other admin routes.
      const server = await startAdminServer({ store: a.store, token: 'secret-token-for-tests' });
      cleanups.push(() => server.close());
      const auth = { authorization: 'Bearer secret-token-for-tests' };
      const json = { ...auth, 'content-type': 'application/json' };
      const listed = await fetch(`${server.url}/schedules`, { headers: auth });
      expect(listed.status).toBe(200);
      const body = (await listed.json()) as { items: { name: string; lastTick: string; paused: boolean }[] };
      expect(body.items).toEqual([
        expect.objectContaining({
          name: 'paused-one',
          paused: false,
          lastTick: new Date(start + 8000).toISOString(),
        }),
      ]);
      expect((await fetch(`${server.url}/schedules`)).status).toBe(401);
      expect(
        (await fetch(`${server.url}/schedules/paused-one/pause`, { method: 'POST', headers: auth })).status,
      ).toBe(415);
      const paused = await fetch(`${server.url}/schedules/paused-one/pause`, {
        method: 'POST',
        headers: json,
      });
      expect(paused.status).toBe(200);
      expect(await paused.json()).toMatchObject({ name: 'paused-one', paused: true, nextTick: null });
      expect((await b.runtime.schedules.get('paused-one')).paused).toBe(true);
      const resumed = await fetch(`${server.url}/schedules/paused-one/resume`, {
        method: 'POST',
        headers: json,
      });
      expect(await resumed.json()).toMatchObject({ paused: false });
      const missing = await fetch(`${server.url}/schedules/no-such/pause`, { method: 'POST', headers: json });
      expect(missing.status).toBe(404);
      expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
      const bad = await fetch(`${server.url}/schedules/${encodeURIComponent('bad name!')}`, {
        headers: auth,
      });
      expect(bad.status).toBe(400);
      const stats = (await (await fetch(`${server.url}/stats`, { headers: auth })).json()) as {
        schedules: { name: string }[];
      };
      expect(stats.schedules.map((s) => s.name)).toEqual(['paused-one']);
    });
  });
}
