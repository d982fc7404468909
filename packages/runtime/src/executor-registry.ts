import {
  InvalidArgumentError,
  isTransactionOpener,
  UnknownCommandTypeError,
  type BackoffPolicy,
  type ExecutionMode,
  type TransactionOpener,
} from '@asynccmd/core';
import type { AnyExecutor } from './executor.js';
import { validateExecutor } from './options-validation.js';

export { MIN_LEASE_MS } from './options-validation.js';

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
  /** Runs in a transaction of the store's database, committed with its SUCCESS. */
  readonly transactional: boolean;
  /** The ORM bridge's opener its transactions go through; null: the store's own (or not transactional). */
  readonly opener: TransactionOpener<unknown> | null;
  readonly executor: AnyExecutor;
}

export interface RegistryDefaults {
  readonly leaseMs: number;
  readonly backoff: BackoffPolicy;
  /** Names of the declared isolated pools. */
  readonly pools: readonly string[];
}

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
  validateExecutor(executor, defaults.pools);
  const mode = executor.mode ?? 'SCHEDULED';
  return {
    type: executor.type,
    mode,
    pool: mode === 'SCHEDULED' ? null : (executor.pool ?? SHARED_POOL),
    leaseMs: executor.leaseMs ?? defaults.leaseMs,
    backoff: executor.backoff ?? defaults.backoff,
    maxRetry: executor.maxRetry,
    timeoutMs: executor.timeoutMs,
    transactional: executor.transactional === true || isTransactionOpener(executor.transactional),
    opener: isTransactionOpener(executor.transactional) ? executor.transactional : null,
    executor,
  };
}
