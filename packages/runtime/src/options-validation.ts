import {
  EXECUTION_MODES,
  InvalidArgumentError,
  isTransactionOpener,
  LIMITS,
  PRIORITY_RANGE,
} from '@asynccmd/core';
import type { AnyExecutor } from './executor.js';
import { MAX_DURATION_MS } from './ops/duration.js';
import type { AsyncCommandsOptions } from './options.js';
import { rateLimitsOptionProblem } from './rate-limits.js';
import { requireSubmitWindows } from './submit-windows.js';
import { fairShareOptionProblem, keyLimitsOptionProblem, keyRateLimitsOptionProblem } from './key-limits.js';
import { recurringProblem } from './recurring/recurring-options.js';
import { MAX_GROUP_MS, MAX_TRANSACTION_GROUP } from './transaction-group.js';
import type { CleanupWatchOptions } from './services/cleanup-watch.js';
import type { RetentionOptions } from './services/retention.js';
import type { PoolOptions } from './work-pool.js';
import { DEFAULT_ADAPTIVE_QUEUE_LIMIT } from './adaptive-queue.js';

/*
 * Every option of the runtime and of its executors, checked when the runtime is built: a wrong one
 * is an INVALID_ARGUMENT naming it, rather than failures at run time (a backoff that is not a
 * policy, for one, would make every failed attempt's outcome unrecordable).
 */

/** Smallest lease accepted: heartbeats run at a quarter of it and need a few ms each. */
export const MIN_LEASE_MS = 200;
/** Longest delay Node's timers keep; a longer one fires at once (poll, heartbeat, timeout timers). */
export const MAX_TIMER_MS = 2 ** 31 - 1;
/** Most retries a command may be given (the client refuses more at submit). */
export const MAX_RETRY_LIMIT = LIMITS.submitMaxRetry;
/** Characters of a command type name. */
export const MAX_TYPE_LENGTH = LIMITS.typeChars;
/** Characters of an owner name. */
export const MAX_OWNER_LENGTH = LIMITS.submitOwnerChars;
/** Rows one DELETE of a purge may take. */
export const MAX_PURGE_BATCH_SIZE = 100_000;
const MAX_BATCH_SIZE = 10_000;
const MAX_RESCUES_LIMIT = 1000;

/** What is wrong with a value ("must be …"), or null when it is fine. */
type Check = (value: unknown) => string | null;

const integer =
  (min: number, max: number): Check =>
  (v) =>
    typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max
      ? null
      : `must be an integer from ${min} to ${max}, not ${describe(v)}`;

const duration =
  (min: number, max = MAX_TIMER_MS): Check =>
  (v) =>
    typeof v === 'number' && v >= min && v <= max
      ? null
      : `must be a number of milliseconds from ${min} to ${max}, not ${describe(v)}`;

const text =
  (maxLength: number): Check =>
  (v) => {
    if (typeof v !== 'string' || v.length === 0 || v.length > maxLength) {
      return `must be a string of 1 to ${maxLength} characters, not ${describe(v)}`;
    }
    return v.includes('\u0000') ? 'must not contain NUL characters' : null;
  };

const withMethods =
  (what: string, ...methods: string[]): Check =>
  (v) =>
    v !== null &&
    typeof v === 'object' &&
    methods.every((m) => typeof (v as Record<string, unknown>)[m] === 'function')
      ? null
      : `must be ${what} (an object with ${methods.map((m) => `${m}()`).join(', ')}), not ${describe(v)}`;

const aFunction =
  (what: string): Check =>
  (v) =>
    typeof v === 'function' ? null : `must be ${what}, not ${describe(v)}`;

const listOf =
  (what: string, item: Check): Check =>
  (v) => {
    if (!Array.isArray(v)) return `must be an array of ${what}, not ${describe(v)}`;
    for (const [i, element] of v.entries()) {
      const problem = item(element);
      if (problem) return `[${i}] ${problem}`;
    }
    return null;
  };

const backoffPolicy: Check = (v) =>
  withMethods('a BackoffPolicy', 'delayMs')(v) === null
    ? null
    : `must be a BackoffPolicy, an object with delayMs(retryNumber) such as exponentialBackoff(), not ${describe(v)}`;

/** The methods of the store port the runtime calls: a store missing one is not a CommandStore. */
const STORE_METHODS = [
  'transaction',
  'insert',
  'insertIdempotent',
  'claimDue',
  'claimById',
  'heartbeat',
  'complete',
  'fail',
  'release',
  'reclaimHung',
  'get',
  'now',
  'close',
];

/** What is wrong with one pool's options, or null. */
export function poolOptionsProblem(options: unknown): string | null {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    return `must be pool options ({ concurrency, queueSize?, refillAt?, refillWaitMs?, typeTurns? }), not ${describe(options)}`;
  }
  const { concurrency, queueSize, refillAt, refillWaitMs, typeTurns } = options as Partial<
    Record<keyof PoolOptions, unknown>
  >;
  const field = (name: string, problem: string | null) => (problem ? `${name} ${problem}` : null);
  const sizes =
    field('concurrency', integer(1, MAX_BATCH_SIZE)(concurrency)) ??
    (queueSize === undefined ? null : field('queueSize', integer(0, MAX_BATCH_SIZE)(queueSize)));
  if (sizes) return sizes;
  const places =
    (concurrency as number) + ((queueSize as number | undefined) ?? DEFAULT_ADAPTIVE_QUEUE_LIMIT);
  return (
    (refillAt === undefined ? null : field('refillAt', integer(1, places)(refillAt))) ??
    (refillWaitMs === undefined ? null : field('refillWaitMs', duration(0)(refillWaitMs))) ??
    (typeTurns === undefined || typeof typeTurns === 'boolean'
      ? null
      : `typeTurns must be true or false, not ${describe(typeTurns)}`)
  );
}

/** Command type → its default priority. */
const typePriorities: Check = (v) => {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    return `must map command types to priorities, not ${describe(v)}`;
  }
  const priority = integer(PRIORITY_RANGE.min, PRIORITY_RANGE.max);
  for (const [type, value] of Object.entries(v)) {
    const problem = priority(value);
    if (problem) return `type "${type}": ${problem}`;
  }
  return null;
};

/** Command type → the most of it RUNNING at once. */
const typeLimits: Check = (v) => {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    return `must map command types to limits of RUNNING commands, not ${describe(v)}`;
  }
  const limit = integer(1, LIMITS.typeLimit);
  for (const [type, value] of Object.entries(v)) {
    const problem = text(LIMITS.typeChars)(type) ?? limit(value);
    if (problem) return `type "${type}": ${problem}`;
  }
  return null;
};

const pools: Check = (v) => {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    return `must map pool names to pool options, not ${describe(v)}`;
  }
  for (const [name, options] of Object.entries(v)) {
    if (name === 'shared')
      return 'cannot declare "shared": that is the shared pool; configure it with `sharedPool`';
    const problem = poolOptionsProblem(options);
    if (problem) return `pool "${name}": ${problem}`;
  }
  return null;
};

const aBoolean: Check = (v) => (typeof v === 'boolean' ? null : `must be true or false, not ${describe(v)}`);

/** Every field of the `retention` option, with its check (the type makes a new field need one). */
const RETENTION_CHECKS: { readonly [K in keyof RetentionOptions]-?: Check } = {
  olderThanMs: integer(0, MAX_DURATION_MS),
  includeDead: aBoolean,
  batchSize: integer(1, MAX_PURGE_BATCH_SIZE),
  intervalMs: integer(1, MAX_TIMER_MS),
};

const retention: Check = (v) => {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    return `must be retention options ({ olderThanMs, includeDead?, batchSize?, intervalMs? }), not ${describe(v)}`;
  }
  const given = v as Record<string, unknown>;
  for (const [name, value] of Object.entries(given)) {
    const check = (RETENTION_CHECKS as Readonly<Record<string, Check>>)[name];
    if (check === undefined) {
      return `has no field \`${name}\` (fields: ${Object.keys(RETENTION_CHECKS).join(', ')})`;
    }
    const problem = value === undefined ? null : check(value);
    if (problem) return `${name} ${problem}`;
  }
  return given['olderThanMs'] === undefined
    ? 'needs `olderThanMs`: how long a finished command is kept'
    : null;
};

const CLEANUP_WATCH_CHECKS: { readonly [K in keyof CleanupWatchOptions]-?: Check } = {
  intervalMs: integer(1, MAX_TIMER_MS),
  warnAfterMs: integer(0, MAX_DURATION_MS),
};

const cleanupWatch: Check = (v) => {
  if (v === false) return null;
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    return `must be false or { intervalMs?, warnAfterMs? }, not ${describe(v)}`;
  }
  for (const [name, value] of Object.entries(v as Record<string, unknown>)) {
    const check = (CLEANUP_WATCH_CHECKS as Readonly<Record<string, Check>>)[name];
    if (check === undefined) {
      return `has no field \`${name}\` (fields: ${Object.keys(CLEANUP_WATCH_CHECKS).join(', ')})`;
    }
    const problem = value === undefined ? null : check(value);
    if (problem) return `${name} ${problem}`;
  }
  return null;
};

/** Every option of AsyncCommandsOptions, with its check (the type makes a new option need one). */
const OPTION_CHECKS: { readonly [K in keyof AsyncCommandsOptions]-?: Check } = {
  store: withMethods('a CommandStore from an asynccmd adapter', ...STORE_METHODS),
  executors: listOf('executors', (v) =>
    v !== null && typeof v === 'object' ? null : `must be an executor object, not ${describe(v)}`,
  ),
  submitOnlyTypes: listOf('command type names', text(MAX_TYPE_LENGTH)),
  clock: withMethods('a Clock', 'now'),
  tokens: withMethods('a TokenSource', 'next'),
  logger: withMethods('a pino-compatible Logger', 'debug', 'info', 'warn', 'error'),
  interceptors: listOf('interceptors', aFunction('an interceptor function (command, next)')),
  headersProvider: aFunction('a function returning the headers'),
  owner: text(MAX_OWNER_LENGTH),
  instanceId: text(LIMITS.instanceChars),
  maxPayloadBytes: integer(1, 2 ** 31 - 1),
  maxResultBytes: integer(1, LIMITS.resultBytes),
  transactionGroupSize: integer(1, MAX_TRANSACTION_GROUP),
  transactionGroupMs: integer(1, MAX_GROUP_MS),
  defaultMaxRetry: integer(0, MAX_RETRY_LIMIT),
  typePriorities,
  typeLimits,
  rateLimits: rateLimitsOptionProblem,
  // Checked after the loop, against the retention (validateOptions).
  submitWindows: () => null,
  // Checked after the loop, against typeLimits (validateOptions).
  keyLimits: () => null,
  keyRateLimits: () => null,
  fairShare: () => null,
  backoff: backoffPolicy,
  redactError: aFunction('a function (text: string) => string'),
  leaseMs: integer(MIN_LEASE_MS, MAX_TIMER_MS),
  heartbeatIntervalMs: integer(10, MAX_TIMER_MS),
  pollIntervalMs: duration(1),
  sharedPool: poolOptionsProblem,
  pools,
  scheduledBatchSize: integer(1, MAX_BATCH_SIZE),
  scheduledTypeTurns: aBoolean,
  reclaimBatchSize: integer(1, MAX_BATCH_SIZE),
  reclaimIntervalMs: duration(1),
  maxRescues: integer(0, MAX_RESCUES_LIMIT),
  retention,
  cleanupWatch,
  recurring: recurringProblem,
};

/**
 * Checks the options of createAsyncCommands / new AsyncCommands (`store` required) or, with
 * `moduleOptions`, those of asyncCommandModule (the store may be bound separately; executors may
 * be classes the container resolves, checked when it builds the runtime). An option left undefined
 * takes its default.
 */
export function validateOptions(options: unknown, moduleOptions = false): void {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidArgumentError(`asynccmd options must be an object, not ${describe(options)}`);
  }
  const given = options as Record<string, unknown>;
  if (!moduleOptions && given['store'] === undefined) {
    throw new InvalidArgumentError('asynccmd needs a `store` (a CommandStore from an asynccmd adapter)');
  }
  for (const [name, value] of Object.entries(given)) {
    const check = (OPTION_CHECKS as Readonly<Record<string, Check>>)[name];
    if (check === undefined) {
      throw new InvalidArgumentError(
        `asynccmd has no option \`${name}\` (options: ${Object.keys(OPTION_CHECKS).join(', ')})`,
      );
    }
    if (value === undefined) continue;
    const problem =
      moduleOptions && name === 'executors'
        ? listOf('executor classes or objects', (v) =>
            typeof v === 'function' || (v !== null && typeof v === 'object')
              ? null
              : `must be an executor class or object, not ${describe(v)}`,
          )(value)
        : check(value);
    if (problem) throw new InvalidArgumentError(`asynccmd option \`${name}\` ${problem}`);
  }
  const retention = given['retention'] as RetentionOptions | undefined;
  requireSubmitWindows(given['submitWindows'], retention?.olderThanMs);
  const keyed =
    given['keyLimits'] === undefined ? null : keyLimitsOptionProblem(given['keyLimits'], given['typeLimits']);
  if (keyed) throw new InvalidArgumentError(`asynccmd option \`keyLimits\` ${keyed}`);
  const keyRated =
    given['keyRateLimits'] === undefined
      ? null
      : keyRateLimitsOptionProblem(given['keyRateLimits'], {
          typeLimits: given['typeLimits'],
          rateLimits: given['rateLimits'],
          keyLimits: given['keyLimits'],
        });
  if (keyRated) throw new InvalidArgumentError(`asynccmd option \`keyRateLimits\` ${keyRated}`);
  const fair =
    given['fairShare'] === undefined
      ? null
      : fairShareOptionProblem(given['fairShare'], {
          typeLimits: given['typeLimits'],
          keyLimits: given['keyLimits'],
          keyRateLimits: given['keyRateLimits'],
        });
  if (fair) throw new InvalidArgumentError(`asynccmd option \`fairShare\` ${fair}`);
}

/** The heartbeat period: as given, or a quarter of the shortest lease; shorter than every lease. */
export function heartbeatPeriod(given: number | undefined, shortestLeaseMs: number): number {
  const heartbeatMs = given ?? Math.floor(shortestLeaseMs / 4);
  if (!(heartbeatMs >= 10 && heartbeatMs < shortestLeaseMs)) {
    throw new InvalidArgumentError(
      `asynccmd option \`heartbeatIntervalMs\` must be at least 10 ms and shorter than every lease ` +
        `(the shortest is ${shortestLeaseMs} ms), not ${heartbeatMs}`,
    );
  }
  return heartbeatMs;
}

/** Every option of an executor with its check (beyond `type`, checked first; the type makes a new one need one). */
const EXECUTOR_CHECKS: { readonly [K in Exclude<keyof AnyExecutor, 'type'>]-?: Check } = {
  execute: aFunction('an execute(payload, context) method'),
  transactional: (v) =>
    typeof v === 'boolean' || isTransactionOpener(v)
      ? null
      : `must be true, false or an ORM bridge's transaction opener, not ${describe(v)}`,
  mode: (v) =>
    EXECUTION_MODES.includes(v as never)
      ? null
      : `must be one of ${EXECUTION_MODES.join(', ')}, not ${describe(v)}`,
  pool: (v) => (typeof v === 'string' ? null : `must be the name of a pool in \`pools\`, not ${describe(v)}`),
  maxRetry: integer(0, MAX_RETRY_LIMIT),
  backoff: backoffPolicy,
  timeoutMs: duration(1),
  leaseMs: integer(MIN_LEASE_MS, MAX_TIMER_MS),
};

/**
 * Checks one executor: an object with a `type` of 1 to 64 characters, an `execute` method, and
 * optional mode, pool (one of `declaredPools`, never for SCHEDULED), maxRetry, backoff, timeoutMs
 * and leaseMs. Other members (an injected class's dependencies) are its own business.
 */
export function validateExecutor(executor: unknown, declaredPools: readonly string[]): void {
  if (executor === null || typeof executor !== 'object') {
    throw new InvalidArgumentError(`an executor must be an object, not ${describe(executor)}`);
  }
  const e = executor as Record<string, unknown>;
  const typeProblem = text(MAX_TYPE_LENGTH)(e['type']);
  if (typeProblem) throw new InvalidArgumentError(`an executor's \`type\` ${typeProblem}`);
  const type = e['type'] as string;
  const fail = (name: string, problem: string) =>
    new InvalidArgumentError(`executor "${type}": \`${name}\` ${problem}`);
  for (const [name, check] of Object.entries(EXECUTOR_CHECKS)) {
    const value = e[name];
    if (value === undefined && name !== 'execute') continue;
    const problem = check(value);
    if (problem) throw fail(name, problem);
  }
  if (e['pool'] !== undefined) {
    if ((e['mode'] ?? 'SCHEDULED') === 'SCHEDULED') {
      throw fail('pool', 'cannot be set: the executor is SCHEDULED (it runs inline in the poll loop)');
    }
    if (!declaredPools.includes(e['pool'] as string)) {
      throw fail('pool', `names "${String(e['pool'])}", which is not declared in the runtime's \`pools\``);
    }
  }
}

function describe(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (Array.isArray(value)) return 'an array';
  if (value !== null && typeof value === 'object') return 'an object';
  return String(value);
}
