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
