import type { Logger } from '@asynccmd/core';
import type { CommandEvents } from './command-events.js';

/**
 * Reports store failures: a 'store-error' event every time (metrics count them), but one log line
 * per outage and operation, plus one when it recovers — a database restart must not flood the logs.
 */
export class StoreOutage {
  readonly #failing = new Map<string, number>();

  constructor(
    private readonly events: CommandEvents,
    private readonly logger: Logger,
  ) {}

  /** Records a failure of `operation`; returns how many times in a row it has failed. */
  failed(operation: string, error: unknown): number {
    const count = (this.#failing.get(operation) ?? 0) + 1;
    this.#failing.set(operation, count);
    this.events.emit({ kind: 'store-error', operation, error });
    if (count === 1) {
      this.logger.warn(
        { err: error, operation },
        `asynccmd: store ${operation} failed; retrying with backoff until the database is back`,
      );
    }
    return count;
  }

  succeeded(operation: string): void {
    const count = this.#failing.get(operation);
    if (count === undefined) return;
    this.#failing.delete(operation);
    this.logger.info({ operation, failures: count }, `asynccmd: store ${operation} works again`);
  }

  /** Operations currently failing (for health). */
  failing(): string[] {
    return [...this.#failing.keys()];
  }
}

/**
 * The pause before the next try of an operation that has failed `failures` times in a row: 100 ms,
 * doubling up to `capMs`. Every loop and service that meets a store outage backs off by it.
 */
export function outageDelayMs(failures: number, capMs = 5_000): number {
  return Math.min(capMs, 100 * 2 ** Math.max(0, failures - 1));
}

/** setTimeout as a promise that ends early (resolving) when `signal` aborts. */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
