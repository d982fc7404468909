import {
  EXECUTION_MODES,
  InvalidArgumentError,
  UnknownCommandTypeError,
  type BackoffPolicy,
  type ExecutionMode,
} from '@asynccmd/core';
import type { AnyExecutor } from './executor.js';

/** The pool ASYNC_POOL and IMMEDIATE types use unless they name their own. */
export const SHARED_POOL = 'shared';

/** An executor with its defaults filled in. */
export interface RegisteredExecutor {
  readonly type: string;
  readonly mode: ExecutionMode;
  /** The pool that runs it; null for SCHEDULED (inline in the poll loop). */
  readonly pool: string | null;
  readonly leaseMs: number;
  readonly backoff: BackoffPolicy;
  readonly maxRetry: number | undefined;
  readonly timeoutMs: number | undefined;
  readonly executor: AnyExecutor;
}

export interface RegistryDefaults {
  readonly leaseMs: number;
  readonly backoff: BackoffPolicy;
  /** Names of the declared isolated pools. */
  readonly pools: readonly string[];
}

/** Smallest lease accepted: heartbeats run at a quarter of it and need a few ms each. */
export const MIN_LEASE_MS = 200;

/** The command types this instance can run, and how. */
export class ExecutorRegistry {
  readonly #byType = new Map<string, RegisteredExecutor>();

  constructor(executors: readonly AnyExecutor[], defaults: RegistryDefaults) {
    for (const executor of executors) {
      const entry = register(executor, defaults);
      if (this.#byType.has(entry.type)) {
        throw new InvalidArgumentError(`two executors are registered for command type "${entry.type}"`);
      }
      this.#byType.set(entry.type, entry);
    }
  }

  get(type: string): RegisteredExecutor | undefined {
    return this.#byType.get(type);
  }

  /** The entry for `type`, or UnknownCommandTypeError naming the known types. */
  require(type: string): RegisteredExecutor {
    const entry = this.#byType.get(type);
    if (!entry) throw new UnknownCommandTypeError(type, this.types());
    return entry;
  }

  has(type: string): boolean {
    return this.#byType.has(type);
  }

  types(): string[] {
    return [...this.#byType.keys()];
  }

  entries(): RegisteredExecutor[] {
    return [...this.#byType.values()];
  }

  typesOfMode(mode: ExecutionMode): string[] {
    return this.entries()
      .filter((e) => e.mode === mode)
      .map((e) => e.type);
  }
}

function register(executor: AnyExecutor, defaults: RegistryDefaults): RegisteredExecutor {
  const type: unknown = executor?.type;
  if (typeof type !== 'string' || type.length === 0 || type.length > 64) {
    throw new InvalidArgumentError('an executor needs a `type` of 1 to 64 characters');
  }
  if (typeof executor.execute !== 'function') {
    throw new InvalidArgumentError(`executor "${type}" has no execute(payload, context) method`);
  }
  const mode = executor.mode ?? 'SCHEDULED';
  if (!EXECUTION_MODES.includes(mode)) {
    throw new InvalidArgumentError(`executor "${type}": mode must be one of ${EXECUTION_MODES.join(', ')}`);
  }
  if (mode === 'SCHEDULED' && executor.pool !== undefined) {
    throw new InvalidArgumentError(`executor "${type}" is SCHEDULED (inline) and cannot name a pool`);
  }
  if (executor.pool !== undefined && !defaults.pools.includes(executor.pool)) {
    throw new InvalidArgumentError(
      `executor "${type}" names pool "${executor.pool}", which is not declared in the runtime's \`pools\``,
    );
  }
  const leaseMs = executor.leaseMs ?? defaults.leaseMs;
  checkPositive(type, 'leaseMs', leaseMs, MIN_LEASE_MS);
  if (executor.timeoutMs !== undefined) checkPositive(type, 'timeoutMs', executor.timeoutMs, 1);
  if (executor.maxRetry !== undefined && !(Number.isInteger(executor.maxRetry) && executor.maxRetry >= 0)) {
    throw new InvalidArgumentError(`executor "${type}": maxRetry must be an integer ≥ 0`);
  }
  return {
    type,
    mode,
    pool: mode === 'SCHEDULED' ? null : (executor.pool ?? SHARED_POOL),
    leaseMs,
    backoff: executor.backoff ?? defaults.backoff,
    maxRetry: executor.maxRetry,
    timeoutMs: executor.timeoutMs,
    executor,
  };
}

function checkPositive(type: string, field: string, value: number, min: number): void {
  if (!(Number.isFinite(value) && value >= min)) {
    throw new InvalidArgumentError(`executor "${type}": ${field} must be a number ≥ ${min}`);
  }
}
