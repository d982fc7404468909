import { describe, expect, it } from 'vitest';
import type {
  CommandStore,
  EnqueueTickResult,
  ScheduleDefinition,
  ScheduleStore,
  ScheduleTick,
} from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import { claimOne, newCommand, rejectionCode, submit, uniqueType, useArea } from '../support.js';

let names = 0;
/** A schedule name no other test uses. */
function uniqueName(): string {
  names += 1;
  return `sched.${names}-${Math.random().toString(36).slice(2, 8)}`;
}

function schedulesOf<Tx>(store: CommandStore<Tx>): ScheduleStore {
  const schedules = store.schedules;
  if (schedules === undefined) throw new Error('this store has no `schedules`');
  return schedules;
}

const HOUR = 3_600_000;
/** Whole seconds, as cron ticks are. */
const BASE = Math.floor(Date.now() / 1000) * 1000;
const at = (offsetMs: number): Date => new Date(BASE + offsetMs);

function tickOf(schedule: string, type: string, tick: Date): ScheduleTick {
  return {
    schedule,
    tick,
    command: newCommand(type, {
      payloadJson: JSON.stringify({ tick: tick.toISOString() }),
      runAt: tick,
      headers: { 'asynccmd-schedule': schedule, 'asynccmd-tick': tick.toISOString() },
    }),
  };
}

/** Declares a fresh schedule of a fresh type, active from an hour before BASE. */
async function freshSchedule<Tx>(store: CommandStore<Tx>): Promise<{ name: string; type: string }> {
  const name = uniqueName();
  const type = uniqueType('tick');
  await schedulesOf(store).declare([{ name, type, cron: '* * * * * *', timezone: null }], at(-HOUR));
  return { name, type };
}

export function schedulesArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('recurring schedules', () => {
    const ctx = useArea(factory, adapter, 'sch');

    it('declare creates a schedule once, and a new declaration updates only its definition', async () => {
      const store = ctx.store();
      const schedules = schedulesOf(store);
      const name = uniqueName();
      const first: ScheduleDefinition = { name, type: 'report.daily', cron: '0 0 * * *', timezone: null };
      await schedules.declare([first], at(0));
      expect(await schedules.get(name)).toEqual({
        ...first,
        paused: false,
        lastTick: null,
        activeFrom: at(0),
        runTime: null,
      });
      await schedules.setPaused(name, true, at(1000));
      const type = uniqueType();
      await schedules.enqueueTick(tickOf(name, 'report.daily', at(HOUR)));
      const second = { name, type, cron: '0 30 2 * * *', timezone: 'Europe/Paris' };
      await schedules.declare([second], at(2 * HOUR));
      expect(await schedules.get(name)).toEqual({
        ...second,
        paused: true,
        lastTick: null,
        activeFrom: at(0),
        runTime: null,
      });
      expect((await schedules.list()).map((s) => s.name)).toContain(name);
      expect(await schedules.get(uniqueName())).toBeNull();
    });

    it('add stores a run-time schedule with its settings once; a declaration in code takes it over', async () => {
      const schedules = schedulesOf(ctx.store());
      const name = uniqueName();
      const definition: ScheduleDefinition = {
        name,
        type: 'report.hourly',
        cron: '0 * * * *',
        timezone: 'Asia/Tokyo',
      };
      const settings = { payloadJson: '{"scope":"all","n":1}', catchUp: 3, maxRetry: 2 } as const;
      const expected = { ...definition, paused: false, lastTick: null, activeFrom: at(0), runTime: settings };
      expect(await schedules.add(definition, settings, at(0))).toEqual(expected);
      expect(await schedules.get(name)).toEqual(expected);
      // The name is taken: nothing changes.
      expect(
        await schedules.add({ ...definition, cron: '* * * * *' }, { ...settings, maxRetry: null }, at(1)),
      ).toBeNull();
      expect(await schedules.get(name)).toEqual(expected);
      await schedules.declare([{ ...definition, type: 'report.code' }], at(2));
      expect(await schedules.get(name)).toMatchObject({ type: 'report.code', runTime: null });
      expect(await schedules.remove(name)).toBe(true);
      expect(await schedules.get(name)).toBeNull();
    });

    it('declaring the same schedules from several instances at once leaves one row each', async () => {
      const store = ctx.store();
      const peers = [store, await ctx.harness().openPeer(), await ctx.harness().openPeer()];
      const defs = [uniqueName(), uniqueName()].map((name) => ({
        name,
        type: 't',
        cron: '* * * * *',
        timezone: null,
      }));
      await Promise.all(peers.map((p) => schedulesOf(p).declare(defs, at(0))));
      const listed = (await schedulesOf(store).list()).filter((s) => defs.some((d) => d.name === s.name));
      expect(listed).toHaveLength(2);
      await Promise.all(peers.slice(1).map((p) => p.close()));
    });

    it('a tick becomes one PENDING command carrying what was given, and the last tick moves', async () => {
      const store = ctx.store();
      const schedules = schedulesOf(store);
      const { name, type } = await freshSchedule(store);
      const tick = tickOf(name, type, at(0));
      const result = await schedules.enqueueTick(tick);
      expect(result.outcome).toBe('enqueued');
      const id = (result as { id: string }).id;
      const row = await store.get(id);
      expect(row).toMatchObject({
        type,
        status: 'PENDING',
        payload: { tick: at(0).toISOString() },
        nextRunAt: at(0),
        headers: { 'asynccmd-schedule': name, 'asynccmd-tick': at(0).toISOString() },
        idempotent: false,
      });
      expect((await schedules.get(name))?.lastTick).toEqual(at(0));
      // The same tick again, and an earlier one: passed, nothing inserted.
      expect(await schedules.enqueueTick(tick)).toEqual({ outcome: 'passed' });
      expect(await schedules.enqueueTick(tickOf(name, type, at(-1000)))).toEqual({ outcome: 'passed' });
      expect((await store.list({ type })).items).toHaveLength(1);
      expect((await claimOne(store, type)).id).toBe(id);
    });

    it('the (schedule, tick) key holds for the life of the row: even a finished tick is never inserted again', async () => {
      const store = ctx.store();
      const schedules = schedulesOf(store);
      const { name, type } = await freshSchedule(store);
      const first = await schedules.enqueueTick(tickOf(name, type, at(0)));
      const c = await claimOne(store, type);
      expect(await store.complete([{ id: c.id, token: c.claimToken }])).toEqual([c.id]);
      expect((first as { id: string }).id).toBe(c.id);
      // Forget the schedule's last tick: only the key in the command table is left to refuse it.
      expect(await schedules.remove(name)).toBe(true);
      expect(await schedules.remove(name)).toBe(false);
      await schedules.declare([{ name, type, cron: '* * * * * *', timezone: null }], at(-HOUR));
      expect((await schedules.get(name))?.lastTick).toBeNull();
      expect(await schedules.enqueueTick(tickOf(name, type, at(0)))).toEqual({ outcome: 'duplicate' });
      expect((await schedules.enqueueTick(tickOf(name, type, at(1000)))).outcome).toBe('enqueued');
      expect((await store.list({ type })).items).toHaveLength(2);
      // Ordinary commands carry no key: any number of them, of the same type, never collide.
      await submit(store, [newCommand(type), newCommand(type)]);
      expect((await store.list({ type })).items).toHaveLength(4);
    });

    it('instances racing over the same ticks on their own connections insert each tick exactly once', async () => {
      const store = ctx.store();
      const { name, type } = await freshSchedule(store);
      const peers = [store, await ctx.harness().openPeer(), await ctx.harness().openPeer()];
      const ticks = Array.from({ length: 8 }, (_, i) => at(i * 1000));
      const results: EnqueueTickResult[][] = await Promise.all(
        peers.map(async (peer) => {
          const seen: EnqueueTickResult[] = [];
          for (const t of ticks) seen.push(await schedulesOf(peer).enqueueTick(tickOf(name, type, t)));
          return seen;
        }),
      );
      for (let i = 0; i < ticks.length; i++) {
        const outcomes = results.map((r) => r[i]?.outcome);
        expect(outcomes.filter((o) => o === 'enqueued')).toHaveLength(1);
        for (const o of outcomes) expect(['enqueued', 'duplicate', 'passed']).toContain(o);
      }
      const rows = (await store.list({ type, limit: 100 })).items;
      expect(rows.map((r) => r.nextRunAt.getTime()).sort((a, b) => a - b)).toEqual(
        ticks.map((t) => t.getTime()),
      );
      expect((await schedulesOf(store).get(name))?.lastTick).toEqual(ticks.at(-1));
      await Promise.all(peers.slice(1).map((p) => p.close()));
    });

    it('a paused schedule enqueues nothing; a resume skips the ticks of the pause', async () => {
      const store = ctx.store();
      const schedules = schedulesOf(store);
      const { name, type } = await freshSchedule(store);
      const paused = await schedules.setPaused(name, true, at(0));
      expect(paused?.paused).toBe(true);
      expect(await schedules.enqueueTick(tickOf(name, type, at(1000)))).toEqual({ outcome: 'paused' });
      // Pausing again changes nothing.
      expect((await schedules.setPaused(name, true, at(5000)))?.activeFrom).toEqual(at(-HOUR));
      const resumed = await schedules.setPaused(name, false, at(10_000));
      expect(resumed).toMatchObject({ paused: false, activeFrom: at(10_000) });
      expect(await schedules.enqueueTick(tickOf(name, type, at(9000)))).toEqual({ outcome: 'passed' });
      expect((await schedules.enqueueTick(tickOf(name, type, at(10_000)))).outcome).toBe('enqueued');
      // Resuming a running schedule leaves its activation alone.
      expect((await schedules.setPaused(name, false, at(20_000)))?.activeFrom).toEqual(at(10_000));
      expect((await store.list({ type })).items).toHaveLength(1);
      // Pause state is the database's: another instance sees it.
      const peer = await ctx.harness().openPeer();
      await schedulesOf(peer).setPaused(name, true, at(30_000));
      expect((await schedules.get(name))?.paused).toBe(true);
      await peer.close();
    });

    it('an unknown schedule is reported, and bad input is refused before any SQL', async () => {
      const store = ctx.store();
      const schedules = schedulesOf(store);
      const type = uniqueType();
      expect(await schedules.enqueueTick(tickOf(uniqueName(), type, at(0)))).toEqual({ outcome: 'unknown' });
      expect(await schedules.setPaused(uniqueName(), true, at(0))).toBeNull();
      expect(await rejectionCode(schedules.get("x'; DROP TABLE t; --"))).toBe('INVALID_ARGUMENT');
      expect(await rejectionCode(schedules.setPaused('', true, at(0)))).toBe('INVALID_ARGUMENT');
      expect(
        await rejectionCode(
          schedules.declare([{ name: uniqueName(), type: '', cron: '* * * * *', timezone: null }], at(0)),
        ),
      ).toBe('INVALID_ARGUMENT');
      const { name } = await freshSchedule(store);
      expect(
        await rejectionCode(schedules.enqueueTick({ ...tickOf(name, type, at(0)), tick: new Date(NaN) })),
      ).toBe('INVALID_ARGUMENT');
      expect(
        await rejectionCode(
          schedules.enqueueTick({
            ...tickOf(name, type, at(0)),
            command: newCommand(type, { payloadJson: 'not json' }),
          }),
        ),
      ).toBe('PAYLOAD_NOT_SERIALISABLE');
      expect((await store.list({ type })).items).toHaveLength(0);
      expect((await schedules.get(name))?.lastTick).toBeNull();
    });
  });
}
