import 'reflect-metadata';
import { Container, injectable } from 'inversify';
import { describe, expect, it } from 'vitest';
import { exponentialBackoff } from '@asynccmd/core';
import { asyncCommandModule, AsyncCommandTokens } from '../src/inversify.js';
import {
  createAsyncCommands,
  defineExecutor,
  type AnyExecutor,
  type AsyncCommandsOptions,
} from '../src/index.js';
import { stubStore } from './stub-store.js';

const executor = defineExecutor({ type: 'order.ship', mode: 'ASYNC_POOL', execute: () => undefined });
const good = (): AsyncCommandsOptions => ({ store: stubStore({}), executors: [executor] });

/** What building the runtime with `options` throws: its code and message. */
function refusal(options: unknown): { code: unknown; message: string } | null {
  try {
    createAsyncCommands(options as AsyncCommandsOptions & { executors: readonly AnyExecutor[] });
    return null;
  } catch (e) {
    return { code: (e as { code?: unknown }).code, message: (e as Error).message };
  }
}

const fn = () => 100;

/** Each option of createAsyncCommands with values it must refuse. */
const BAD_OPTIONS: readonly (readonly [option: string, values: readonly unknown[]])[] = [
  ['store', [undefined, null, {}, 'postgres://db', { insert: () => [] }]],
  ['executors', ['order.ship', {}, [null], [42]]],
  ['submitOnlyTypes', ['report.render', [''], [42], ['x'.repeat(129)], ['a\u0000b']]],
  ['clock', [null, {}, () => new Date(), { now: 5 }]],
  ['tokens', [null, {}, () => 'token']],
  ['logger', [null, console.log, { info: fn, warn: fn, error: fn }]],
  ['interceptors', [fn, [{}], [null]]],
  ['headersProvider', [{}, { traceparent: 'x' }]],
  ['owner', ['', 42, 'x'.repeat(65), 'svc\u0000']],
  ['instanceId', ['', 42, 'x'.repeat(129), 'host\u0000']],
  ['maxPayloadBytes', [0, -1, 1.5, NaN, Infinity, '65536', 2 ** 31]],
  ['transactionGroupSize', [0, -1, 1.5, NaN, 33, '16']],
  ['transactionGroupMs', [0, -1, 2.5, NaN, 1001, '20']],
  ['defaultMaxRetry', [-1, 1.5, 1001, NaN, '5']],
  ['typePriorities', [null, 5, [1], { a: 1.5 }, { a: 32768 }, { a: '1' }]],
  ['typeLimits', [null, 5, [1], { a: 0 }, { a: -1 }, { a: 1.5 }, { a: 100_001 }, { a: '2' }, { '': 1 }]],
  [
    'rateLimits',
    [
      null,
      5,
      [1],
      { a: 5 },
      { a: { maxStarts: 1, periodMs: 1_000 } },
      { a: { maxStarts: 0, periodMs: 1_000 } },
      { a: { maxStarts: 2.5, periodMs: 1_000 } },
      { a: { maxStarts: 10, periodMs: 0 } },
      { a: { maxStarts: 10, periodMs: 8 * 86_400_000 } },
      { a: { maxStarts: 10, periodMs: 1_000, burst: 0 } },
      { a: { maxStarts: 10, periodMs: 1_000, burst: 10 } },
      { a: { maxStarts: 10, periodMs: 1_000, perMinute: 1 } },
      { '': { maxStarts: 10, periodMs: 1_000 } },
    ],
  ],
  ['backoff', [fn, null, {}, { delayMs: 100 }, exponentialBackoff]],
  ['leaseMs', [0, 199, 1000.5, NaN, 2 ** 31, '8000']],
  ['heartbeatIntervalMs', [0, 9, 10.5, 8_000, 60_000, NaN, '2000']],
  ['pollIntervalMs', [0, -5, NaN, Infinity, 2 ** 31, '1000']],
  ['reclaimIntervalMs', [0, NaN, 2 ** 31]],
  [
    'sharedPool',
    [
      null,
      8,
      { concurrency: 0 },
      { concurrency: 1.5 },
      { concurrency: 2, queueSize: -1 },
      { concurrency: 2, queueSize: 0, refillAt: 5 },
      { concurrency: 2, refillWaitMs: -1 },
      { concurrency: 2, refillWaitMs: 2 ** 31 },
    ],
  ],
  ['pools', [null, [], { shared: { concurrency: 1 } }, { reports: null }, { reports: { concurrency: 0 } }]],
  ['scheduledBatchSize', [0, 2.5, 10_001, NaN]],
  ['reclaimBatchSize', [0, 2.5, 10_001]],
  ['maxRescues', [-1, 1.5, 1001]],
  [
    'recurring',
    [
      null,
      {},
      [null],
      [{ cron: '* * * * *', type: 't' }],
      [{ name: 'bad name', cron: '* * * * *', type: 't' }],
      [{ name: 'a', cron: 'every minute', type: 't' }],
      [{ name: 'a', cron: '* * * * * * * *', type: 't' }],
      [{ name: 'a', cron: '0 0 30 2 *', type: 't' }],
      [{ name: 'a', cron: '* * * * *', type: 't', timezone: 'Mars/Olympus' }],
      [{ name: 'a', cron: '* * * * *', type: 't', catchUp: 'all' }],
      [{ name: 'a', cron: '* * * * *', type: 't', catchUp: 0 }],
      [{ name: 'a', cron: '* * * * *', type: 't', catchUp: 1001 }],
      [{ name: 'a', cron: '* * * * *', type: 't', missedAfterMs: -1 }],
      [{ name: 'a', cron: '* * * * *', type: 't', payloadFor: 'x' }],
      [{ name: 'a', cron: '* * * * *', type: 't', payload: 1, payloadFor: () => 1 }],
      [{ name: 'a', cron: '* * * * *', type: 't', every: 5 }],
      [
        { name: 'a', cron: '* * * * *', type: 't' },
        { name: 'a', cron: '0 * * * *', type: 't' },
      ],
    ],
  ],
  [
    'retention',
    [
      null,
      true,
      '7d',
      [],
      {},
      { olderThanMs: -1 },
      { olderThanMs: 1.5 },
      { olderThanMs: '7d' },
      { olderThanMs: 36_500 * 86_400_000 + 1 },
      { olderThanMs: 0, includeDead: 'yes' },
      { olderThanMs: 0, batchSize: 0 },
      { olderThanMs: 0, batchSize: 100_001 },
      { olderThanMs: 0, intervalMs: 0 },
      { olderThanMs: 0, intervalMs: 2 ** 31 },
      { olderThan: 86_400_000 },
      { olderThanMs: 0, interval: 1000 },
    ],
  ],
];

/** Each option of an executor with values it must refuse. */
const BAD_EXECUTOR_OPTIONS: readonly (readonly [option: string, values: readonly unknown[]])[] = [
  ['type', [undefined, '', 42, 'x'.repeat(129), 'order\u0000ship']],
  ['execute', [undefined, 'run']],
  ['mode', ['FAST', 1]],
  ['pool', [42, 'undeclared']],
  ['maxRetry', [-1, 1.5, 1001, '3']],
  ['backoff', [fn, { delayMs: 1 }]],
  ['timeoutMs', [0, NaN, 2 ** 31, '100']],
  ['leaseMs', [199, 1000.5, 2 ** 31]],
  ['transactional', ['yes', 1, null]],
];

describe('options are validated when the runtime is built', () => {
  it('accepts the defaults and every option at a sensible value', () => {
    expect(refusal(good())).toBeNull();
    expect(
      refusal({
        ...good(),
        executors: [{ ...executor, pool: 'reports', leaseMs: 30_000, timeoutMs: 5_000, maxRetry: 3 }],
        submitOnlyTypes: ['report.render'],
        clock: { now: () => new Date() },
        tokens: { next: () => 't' },
        logger: { debug: fn, info: fn, warn: fn, error: fn },
        interceptors: [(_c: unknown, next: () => Promise<void>) => next()],
        headersProvider: () => ({}),
        owner: 'orders',
        maxPayloadBytes: 1024,
        defaultMaxRetry: 0,
        backoff: exponentialBackoff({ baseMs: 10 }),
        leaseMs: 8_000,
        heartbeatIntervalMs: 1_000,
        pollIntervalMs: 250,
        reclaimIntervalMs: 500,
        sharedPool: { concurrency: 4, queueSize: 2, refillAt: 3, refillWaitMs: 5 },
        pools: { reports: { concurrency: 1 } },
        scheduledBatchSize: 10,
        reclaimBatchSize: 100,
        maxRescues: 0,
        typeLimits: { 'order.ship': 2 },
        rateLimits: { 'order.ship': { maxStarts: 100, periodMs: 60_000, burst: 5 } },
        retention: { olderThanMs: 7 * 86_400_000, includeDead: true, batchSize: 500, intervalMs: 600_000 },
      }),
    ).toBeNull();
    expect(refusal({ ...good(), retention: { olderThanMs: 0 } })).toBeNull();
  });

  it('refuses `typeLimits` on a store that keeps none', () => {
    const r = refusal({
      ...good(),
      store: stubStore({ typeLimits: undefined }),
      typeLimits: { 'order.ship': 2 },
    });
    expect(r).toEqual({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('`typeLimits`') });
  });

  it('refuses `rateLimits` on a store that keeps none', () => {
    const r = refusal({
      ...good(),
      store: stubStore({ rateLimits: undefined }),
      rateLimits: { 'order.ship': { maxStarts: 100, periodMs: 60_000 } },
    });
    expect(r).toEqual({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('`rateLimits`') });
  });

  it('refuses options that are not an object', () => {
    for (const options of [undefined, null, 'postgres://db', 42]) {
      expect(refusal(options)?.code).toBe('INVALID_ARGUMENT');
    }
  });

  describe.each(BAD_OPTIONS)('option `%s`', (option, values) => {
    it.each(values.map((value) => [describeValue(value), value]))(
      'refuses %s with INVALID_ARGUMENT naming it',
      (_label, value) => {
        const r = refusal({ ...good(), [option]: value });
        expect(r).toEqual({ code: 'INVALID_ARGUMENT', message: expect.stringContaining(`\`${option}\``) });
      },
    );
  });

  describe.each(BAD_EXECUTOR_OPTIONS)('executor option `%s`', (option, values) => {
    it.each(values.map((value) => [describeValue(value), value]))(
      'refuses %s with INVALID_ARGUMENT naming the executor and the option',
      (_label, value) => {
        const r = refusal({ ...good(), executors: [{ ...executor, [option]: value }] });
        expect(r?.code).toBe('INVALID_ARGUMENT');
        expect(r?.message).toContain(`\`${option}\``);
        if (option !== 'type') expect(r?.message).toContain('"order.ship"');
      },
    );
  });

  it('refuses an executor that is not an object, and SCHEDULED types that name a pool', () => {
    for (const bad of [null, 'order.ship', () => undefined]) {
      expect(refusal({ ...good(), executors: [bad] })?.code).toBe('INVALID_ARGUMENT');
    }
    const scheduled = { type: 'order.audit', execute: () => undefined, pool: 'reports' };
    expect(refusal({ ...good(), executors: [scheduled], pools: { reports: { concurrency: 1 } } })).toEqual({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('`pool`'),
    });
  });

  it('refuses a transactional executor on a store that cannot complete in transactions, naming the executor', () => {
    const transactional = { ...executor, transactional: true };
    expect(refusal({ ...good(), executors: [transactional] })).toEqual({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/"order\.ship" is transactional.*the stub store does not/),
    });
    const completing = stubStore({
      transactionalCompletion: {
        complete: async () => true,
        succeededUnder: async () => false,
        isTransient: () => false,
      },
    });
    expect(refusal({ store: completing, executors: [transactional] })).toBeNull();
    // An ORM bridge's opener needs a completion through an SqlExecutor.
    const opener = { kind: 'transaction-opener', transaction: async () => undefined };
    const throughOrm = { ...executor, transactional: opener };
    expect(refusal({ store: completing, executors: [throughOrm] })).toEqual({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/"order\.ship" runs in an ORM's transaction.*the stub store cannot/),
    });
    const throughExecutors = stubStore({
      transactionalCompletion: {
        complete: async () => true,
        succeededUnder: async () => false,
        isTransient: () => false,
        throughSqlExecutor: true,
      },
    });
    expect(refusal({ store: throughExecutors, executors: [throughOrm] })).toBeNull();
    expect(refusal({ ...good(), executors: [{ ...executor, transactional: { kind: 'other' } }] })?.code).toBe(
      'INVALID_ARGUMENT',
    );
  });

  it('refuses an option it does not know (a misspelt one would silently keep its default)', () => {
    expect(refusal({ ...good(), leaseMS: 30_000 })).toEqual({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('`leaseMS`'),
    });
  });

  it('validates asyncCommandModule options when the module is built, and its executors when the runtime is', () => {
    const build = (options: Record<string, unknown>) => () => asyncCommandModule(options as never);
    expect(build({ backoff: fn })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(build({ backoff: fn })).toThrow('`backoff`');
    expect(build({ pollIntervalMs: 0 })).toThrow('`pollIntervalMs`');
    expect(build({ leaseMS: 1 })).toThrow('`leaseMS`');
    expect(build({ executors: ['order.ship'] })).toThrow('`executors`');
    expect(build({ retention: { olderThanMs: -1 } })).toThrow('`retention` olderThanMs');

    @injectable()
    class SlowExecutor {
      readonly type = 'report.render';
      readonly leaseMs = 50;
      execute(): void {}
    }
    const container = new Container();
    container.load(asyncCommandModule({ store: stubStore({}), executors: [SlowExecutor] }));
    expect(() => container.get(AsyncCommandTokens.Runtime)).toThrow('`leaseMs`');
  });
});

function describeValue(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'string') return JSON.stringify(value.length > 20 ? `${value.slice(0, 20)}…` : value);
  if (typeof value === 'number' || value === null || value === undefined) return String(value);
  const text = JSON.stringify(value);
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}
