import { silentLogger, type CommandEvent } from '@asynccmd/core';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CommandEvents } from '../../src/command-events.js';
import {
  PeriodicService,
  type PeriodicServiceConfig,
  type RunOutcome,
} from '../../src/services/periodic-service.js';
import { StoreOutage } from '../../src/store-outage.js';
import { recordingLogger } from '../ops/support.js';

/** A service whose runs do what the test says: each run takes the next planned step. */
class Planned extends PeriodicService {
  /** The fake time each run started at. */
  readonly starts: number[] = [];
  /** What the next runs do; when it is empty, a run is `done`. */
  readonly plan: (RunOutcome | Error | Promise<RunOutcome>)[] = [];
  signals: AbortSignal[] = [];

  constructor(config: Partial<PeriodicServiceConfig>, outage: StoreOutage) {
    super(
      { operation: 'chore', intervalMs: 100, runOnStart: true, maxOutageDelayMs: 1_000, ...config },
      outage,
    );
  }

  protected async work(signal: AbortSignal): Promise<RunOutcome> {
    this.starts.push(Date.now());
    this.signals.push(signal);
    const step = this.plan.shift() ?? 'done';
    if (step instanceof Error) throw step;
    return step;
  }
}

function setUp(config: Partial<PeriodicServiceConfig> = {}) {
  const events = new CommandEvents(silentLogger);
  const errors: CommandEvent[] = [];
  events.on((e) => e.kind === 'store-error' && errors.push(e));
  const log = recordingLogger();
  const outage = new StoreOutage(events, log.logger);
  return { service: new Planned(config, outage), outage, errors, log };
}

/** Fires the timers due within `ms`, one at a time, letting each run settle before the next. */
const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);

describe('the periodic-service base', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'], now: 0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('runs at start and then once per interval, or first one interval on', async () => {
    const { service } = setUp();
    service.start();
    service.start(); // a second start changes nothing
    await advance(350);
    expect(service.starts).toEqual([0, 100, 200, 300]);
    await service.stop();

    const later = setUp({ runOnStart: false }).service;
    later.start();
    await advance(250);
    expect(later.starts).toEqual([450, 550]);
    await later.stop();
  });

  it('a run that outlasts its interval skips the ticks it covered; `more` runs again at once', async () => {
    const { service } = setUp();
    let finish: (outcome: RunOutcome) => void = () => undefined;
    service.plan.push(new Promise<RunOutcome>((resolve) => (finish = resolve)), 'more', 'more');
    service.start();
    await advance(250); // the first run is still in flight at 100 and 200
    expect(service.starts).toEqual([0]);
    finish('done');
    await advance(0);
    expect(service.starts).toEqual([0]);
    await advance(50); // the next tick of the grid, 300: two `more`, each run again at once, then `done`
    await advance(5); // (a timeout of 0 set while fake timers tick fires 1 ms on)
    expect(service.starts).toHaveLength(4);
    expect(service.starts.slice(1).every((t) => t >= 300 && t < 305)).toBe(true);
    await advance(100);
    expect(service.starts).toHaveLength(5);
    expect(service.starts[4]).toBe(service.starts[3]! + 100);
    await service.stop();
  });

  it('backs off on a store outage, reports every failure and logs once per outage and once when it is over', async () => {
    const { service, outage, errors, log } = setUp();
    const down = () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    service.plan.push(down(), down(), down(), down(), down(), down(), 'idle', 'done');
    service.start();
    await advance(10_000);
    // Waits of 100 ms doubling, never under the interval, capped at maxOutageDelayMs (1 s).
    expect(service.starts.slice(0, 8)).toEqual([0, 100, 300, 700, 1_500, 2_500, 3_500, 3_600]);
    expect(errors).toHaveLength(6);
    expect(errors.every((e) => e.kind === 'store-error' && e.operation === 'chore')).toBe(true);
    const warnings = log.entries.filter((e) => e.level === 'warn');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.obj).toMatchObject({ operation: 'chore' });
    // An idle run asked nothing of the store: the outage is over only with the run that succeeded.
    const recovered = log.entries.filter((e) => e.level === 'info' && e.msg.includes('works again'));
    expect(recovered).toHaveLength(1);
    expect(recovered[0]?.obj).toMatchObject({ operation: 'chore', failures: 6 });
    expect(outage.failing()).toEqual([]);
    // Back on its interval.
    expect(service.starts.slice(8, 10)).toEqual([3_700, 3_800]);
    await service.stop();
  });

  it('an idle run neither ends an outage nor goes on with it', async () => {
    const { service, outage } = setUp();
    service.plan.push(new Error('down'), 'idle');
    service.start();
    await advance(0);
    expect(outage.failing()).toEqual(['chore']);
    await advance(100);
    expect(service.starts).toEqual([0, 100]);
    expect(outage.failing()).toEqual(['chore']);
    await advance(100);
    expect(outage.failing()).toEqual([]);
    await service.stop();
  });

  it('stop() aborts the run in flight, waits for it, and leaves no timer behind', async () => {
    const { service } = setUp();
    let finish: (outcome: RunOutcome) => void = () => undefined;
    service.plan.push('done', new Promise<RunOutcome>((resolve) => (finish = resolve)));
    service.start();
    await advance(0);
    expect(vi.getTimerCount()).toBe(1); // the next run
    await advance(100); // the second run starts and hangs
    expect(service.starts).toEqual([0, 100]);
    let stopped = false;
    const stopping = service.stop().then(() => (stopped = true));
    expect(service.signals[1]?.aborted).toBe(true);
    await advance(0);
    expect(stopped).toBe(false);
    finish('done');
    await stopping;
    expect(vi.getTimerCount()).toBe(0);
    expect(service.started).toBe(false);
    await advance(1_000);
    expect(service.starts).toEqual([0, 100]); // nothing ran after stop()

    // Started again, it runs again; stopped before its first run, it leaves nothing either.
    service.start();
    await advance(0);
    expect(service.starts).toEqual([0, 100, 1_100]);
    await service.stop();
    expect(vi.getTimerCount()).toBe(0);
    const never = setUp({ runOnStart: false }).service;
    never.start();
    await never.stop();
    expect(vi.getTimerCount()).toBe(0);
    expect(never.starts).toEqual([]);
  });

  it('refuses a config it cannot run on with INVALID_ARGUMENT', () => {
    for (const bad of [
      { intervalMs: 0 },
      { intervalMs: Number.NaN },
      { intervalMs: 2 ** 31 },
      { maxOutageDelayMs: 50 }, // under the interval
      { operation: '' },
    ]) {
      expect(() => setUp(bad), JSON.stringify(bad)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
    }
  });
});
