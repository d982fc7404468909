import { describe, expect, it } from 'vitest';
import { immediateBackoff, silentLogger, systemClock, type CommandStore } from '@asynccmd/core';
import { CommandEvents } from '../src/command-events.js';
import { CommandRunner } from '../src/command-runner.js';
import { Dispatcher } from '../src/dispatcher.js';
import { ExecutorRegistry } from '../src/executor-registry.js';
import { LeaseKeeper } from '../src/services/lease-keeper.js';
import { OutcomeWriter } from '../src/outcome-writer.js';
import { PoolSet } from '../src/pool-set.js';
import { StoreOutage } from '../src/store-outage.js';
import { claimedRow, stubStore } from './stub-store.js';

let openGate = (): void => undefined;
const gate = new Promise<void>((r) => (openGate = r));
const defaults = { leaseMs: 8000, backoff: immediateBackoff, pools: ['slow'] };

describe('ExecutorRegistry', () => {
  it('fills defaults and refuses duplicates, undeclared pools and pools on SCHEDULED types', () => {
    const reg = new ExecutorRegistry(
      [
        { type: 'a', execute: () => undefined },
        { type: 'b', mode: 'ASYNC_POOL', pool: 'slow', leaseMs: 30000, execute: () => undefined },
        { type: 'c', mode: 'IMMEDIATE', execute: () => undefined },
      ],
      defaults,
    );
    expect(reg.require('a')).toMatchObject({ mode: 'SCHEDULED', pool: null, leaseMs: 8000 });
    expect(reg.require('b')).toMatchObject({ pool: 'slow', leaseMs: 30000 });
    expect(reg.require('c')).toMatchObject({ pool: 'shared' });
    expect(() => reg.require('zzz')).toThrow(expect.objectContaining({ code: 'UNKNOWN_COMMAND_TYPE' }));
    const one = { type: 'a', execute: () => undefined };
    expect(() => new ExecutorRegistry([one, one], defaults)).toThrow(/two executors/);
    expect(
      () =>
        new ExecutorRegistry(
          [{ type: 'x', mode: 'ASYNC_POOL', pool: 'nope', execute: () => undefined }],
          defaults,
        ),
    ).toThrow(/not declared/);
    expect(
      () => new ExecutorRegistry([{ type: 'x', pool: 'slow', execute: () => undefined }], defaults),
    ).toThrow(/SCHEDULED/);
  });
});

/** A runner with a real lease keeper and outcome writer over `store`, as the runtime builds it. */
function wire(store: CommandStore, registry: ExecutorRegistry, pools: PoolSet) {
  const events = new CommandEvents(silentLogger);
  const outage = new StoreOutage(events, silentLogger);
  const leases = new LeaseKeeper(store, outage, 1000);
  const runner = new CommandRunner({
    store,
    registry,
    events,
    clock: systemClock,
    logger: silentLogger,
    interceptors: [],
    leases,
    outcomes: new OutcomeWriter(store, outage),
    outage,
    transactions: null,
    maxResultBytes: 65_536,
    redactError: (text) => text,
    onClaimable: () => undefined,
  });
  return { events, leases, runner, dispatcher: new Dispatcher(pools) };
}

describe('Dispatcher', () => {
  it('runs SCHEDULED inline, hands pool types to their own pool, and makes the caller run when it is full', async () => {
    const registry = new ExecutorRegistry(
      [
        { type: 'inline', execute: () => undefined },
        { type: 'slow', mode: 'ASYNC_POOL', pool: 'slow', execute: () => gate },
        { type: 'fast', mode: 'ASYNC_POOL', execute: () => undefined },
      ],
      defaults,
    );
    const store = stubStore({
      heartbeat: async (refs) => [...refs],
      complete: async (refs) => refs.map((r) => r.id),
    });
    const pools = new PoolSet({ concurrency: 1 }, { slow: { concurrency: 1 } }, () => undefined);
    const { events, runner, dispatcher } = wire(store, registry, pools);
    const runners: string[] = [];
    events.onKind('started', (e) => runners.push(`${e.command.id}:${e.runner}`));

    expect(
      dispatcher.dispatch(runner.track(claimedRow('1', 'inline'), 'poll', performance.now())),
    ).toMatchObject({
      runner: 'inline',
    });
    expect(dispatcher.dispatch(runner.track(claimedRow('2', 'slow'), 'poll', performance.now()))).toBeNull();
    const callerRuns = dispatcher.dispatch(runner.track(claimedRow('3', 'slow'), 'poll', performance.now()));
    expect(callerRuns).toMatchObject({ runner: 'caller' });
    // The slow pool being full does not touch the shared pool.
    expect(dispatcher.dispatch(runner.track(claimedRow('4', 'fast'), 'poll', performance.now()))).toBeNull();
    const ran = callerRuns && runner.execute(callerRuns.execution, callerRuns.runner);
    expect(runners).toEqual(['2:pool:slow', '4:pool:shared', '3:caller']);
    openGate();
    await ran;
    await pools.whenIdle();
  });

  it('forgets a queued claim whose lease was taken away: it never runs and does not hold up shutdown', async () => {
    let open = (): void => undefined;
    const hold = new Promise<void>((r) => (open = r));
    const registry = new ExecutorRegistry(
      [{ type: 'slow', mode: 'ASYNC_POOL', pool: 'slow', execute: () => hold }],
      defaults,
    );
    const store = stubStore({ heartbeat: async () => [], fail: async () => [] });
    const pools = new PoolSet(
      { concurrency: 1 },
      { slow: { concurrency: 1, queueSize: 1 } },
      () => undefined,
    );
    const { events, leases, runner, dispatcher } = wire(store, registry, pools);
    const started: string[] = [];
    events.onKind('started', (e) => started.push(e.command.id));
    expect(dispatcher.dispatch(runner.track(claimedRow('1', 'slow'), 'poll', performance.now()))).toBeNull();
    expect(dispatcher.dispatch(runner.track(claimedRow('2', 'slow'), 'poll', performance.now()))).toBeNull(); // queued
    const fenced: string[] = [];
    events.onKind('fenced', (e) => fenced.push(`${e.command.id}:${e.outcome}`));
    await leases.beat(); // the store says neither claim holds any more
    await runner.whenIdle(); // the running one was aborted, the queued one forgotten
    await pools.whenIdle();
    expect(started).toEqual(['1']);
    expect(fenced).toEqual(['1:failed']);
    open();
  });
});
