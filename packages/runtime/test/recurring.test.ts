import { afterEach, describe, expect, it } from 'vitest';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { createAsyncCommands, defineExecutor, type RecurringSchedule } from '../src/index.js';
import { parseCron } from '../src/recurring/cron.js';
import { planTicks, type CatchUpPolicy } from '../src/recurring/tick-plan.js';
import { tickOf } from '../src/recurring/tick.js';

const T = Date.UTC(2030, 0, 1, 0, 0, 0);
const iso = (ms: number) => new Date(ms).toISOString();
const plan = (cron: string, after: number, now: number, catchUp: CatchUpPolicy, missedAfterMs = 10_000) =>
  planTicks({
    cron: parseCron(cron, null),
    after: new Date(after),
    now: new Date(now),
    catchUp,
    missedAfterMs,
  });

describe('planTicks', () => {
  it('enqueues every due tick that is still on time, and none twice', () => {
    const p = plan('* * * * * *', T, T + 3_500, 'none');
    expect(p.ticks.map((t) => t.getTime())).toEqual([T + 1000, T + 2000, T + 3000]);
    expect(p.through.getTime()).toBe(T + 3_500);
    expect(plan('* * * * * *', T + 3_000, T + 3_500, 'none').ticks).toEqual([]);
    expect(plan('* * * * * *', T + 3_500, T + 3_500, 'latest').ticks).toEqual([]);
  });

  it.each<[CatchUpPolicy, number[]]>([
    ['none', [60]],
    ['latest', [59, 60]],
    [2, [58, 59, 60]],
    [1000, Array.from({ length: 60 }, (_, i) => i + 1)],
  ])(
    'after a downtime, catchUp %s keeps the on-time tick and what the policy says of the missed',
    (catchUp, minutes) => {
      const p = plan('0 * * * * *', T, T + 3_600_000 + 5_000, catchUp);
      expect(p.ticks.map((t) => (t.getTime() - T) / 60_000)).toEqual(minutes);
    },
  );

  it('a tick exactly missedAfterMs old counts as missed', () => {
    expect(plan('0 * * * * *', T - 1, T + 10_000, 'none').ticks).toEqual([]);
    expect(plan('0 * * * * *', T - 1, T + 9_999, 'none').ticks.map((t) => t.getTime())).toEqual([T]);
  });

  it('stops at 1000 ticks in one look and says how far it got', () => {
    const p = plan('* * * * * *', T, T + 5_000_000, 'none', 7 * 86_400_000);
    expect(p.ticks).toHaveLength(1000);
    expect(p.through.getTime()).toBe(T + 1_000_000);
  });
});

describe('cron times (croner)', () => {
  it('reads 5 and 6 fields in a time zone, across a DST change as croner defines it', () => {
    const paris = parseCron('0 30 2 * * *', 'Europe/Paris');
    // 2030-03-31: clocks go from 02:00 to 03:00 in Paris; 02:30 does not exist that day.
    const runs = [new Date(Date.UTC(2030, 2, 29, 12))];
    for (let i = 0; i < 3; i++) runs.push(paris.nextAfter(runs.at(-1) as Date) as Date);
    expect(runs.slice(1).map((d) => d.toISOString())).toEqual([
      '2030-03-30T01:30:00.000Z',
      '2030-03-31T01:00:00.000Z',
      '2030-04-01T00:30:00.000Z',
    ]);
    expect(parseCron('15 * * * *', null).nextAfter(new Date(T))?.toISOString()).toBe(iso(T + 15 * 60_000));
    expect(
      parseCron('* * * * * *', null)
        .latestAtOrBefore(2, new Date(T))
        .map((d) => d.getTime()),
    ).toEqual([T, T - 1000]);
  });
});

describe('the tick of a command', () => {
  it('is read from its headers, and null for an ordinary command', () => {
    expect(tickOf({ 'asynccmd-schedule': 'nightly', 'asynccmd-tick': iso(T) })).toEqual({
      schedule: 'nightly',
      at: new Date(T),
    });
    expect(tickOf({})).toBeNull();
    expect(tickOf({ 'asynccmd-schedule': 'nightly', 'asynccmd-tick': 'soon' })).toBeNull();
  });
});

describe('recurring schedules checked when the runtime is built', () => {
  const stores: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
  });
  const build = (schedule: Partial<RecurringSchedule>, submitOnlyTypes: string[] = []) => {
    const store = createSqliteStore({ filename: ':memory:' });
    stores.push(store);
    const executor = defineExecutor({ type: 'report.daily', execute: () => undefined });
    return () =>
      createAsyncCommands({
        store,
        executors: [executor],
        submitOnlyTypes,
        recurring: [{ name: 'daily', cron: '0 0 * * *', type: 'report.daily', ...schedule }],
      });
  };

  it('accepts a known type, or one of submitOnlyTypes', () => {
    expect(build({})).not.toThrow();
    expect(build({ type: 'elsewhere' }, ['elsewhere'])).not.toThrow();
  });

  it('refuses an unknown type, a payload that is not JSON and a bad maxRetry, naming the schedule', () => {
    expect(build({ type: 'nobody.runs' })).toThrow(/recurring schedule "daily": .*nobody\.runs/);
    expect(build({ payload: { at: 1n } })).toThrow(/recurring schedule "daily"/);
    expect(build({ maxRetry: 1001 })).toThrow(/`recurring` \[0\] "daily": maxRetry/);
  });
});
