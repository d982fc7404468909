import { InvalidArgumentError } from '@asynccmd/core';
import { MAX_TIMER_MS } from '../options-validation.js';
import { outageDelayMs, type StoreOutage } from '../store-outage.js';

const NEVER_ABORTED = new AbortController().signal;

/**
 * What a run tells its service: `done` — wait for the next tick; `more` — work is probably waiting,
 * run again at once; `idle` — there was nothing to do and the store was not asked, so an outage
 * neither goes on nor ends with it.
 */
export type RunOutcome = 'done' | 'more' | 'idle';

export interface PeriodicServiceConfig {
  /** The store operation a run is, as store-error events, outage logs and health name it. */
  readonly operation: string;
  /**
   * From the start of one run to the start of the next. A run that outlasts it skips the ticks it
   * covered: runs never overlap and never pile up behind a slow database.
   */
  readonly intervalMs: number;
  /** The first run comes at start (true) or one interval later (false). */
  readonly runOnStart: boolean;
  /**
   * The longest pause while the store fails: after each failure in a row the service waits
   * `outageDelayMs` (100 ms doubling) up to this, and never less than `intervalMs` unless
   * `retrySooner` is set.
   */
  readonly maxOutageDelayMs: number;
  /**
   * A failed run is tried again after `outageDelayMs` even when that is sooner than `intervalMs`:
   * for a service whose every missed run brings something closer to lapsing (leases).
   */
  readonly retrySooner?: boolean;
}

/** Returns `config` once it is one a service can run on; throws INVALID_ARGUMENT naming what is wrong. */
export function validatePeriodicConfig(config: PeriodicServiceConfig): PeriodicServiceConfig {
  const { operation, intervalMs, maxOutageDelayMs } = config;
  const fail = (problem: string) => new InvalidArgumentError(`asynccmd service "${operation}": ${problem}`);
  if (typeof operation !== 'string' || operation.length === 0) throw fail('needs an operation name');
  const milliseconds = (v: number, min: number) => typeof v === 'number' && v >= min && v <= MAX_TIMER_MS;
  if (!milliseconds(intervalMs, 1)) {
    throw fail(`intervalMs must be a number of milliseconds from 1 to ${MAX_TIMER_MS}, not ${intervalMs}`);
  }
  if (!milliseconds(maxOutageDelayMs, intervalMs)) {
    throw fail(
      `maxOutageDelayMs must be from intervalMs (${intervalMs}) to ${MAX_TIMER_MS}, not ${maxOutageDelayMs}`,
    );
  }
  return config;
}

/**
 * The base of the runtime's background services (lease keeper, hung reclaimer, retention): one
 * timer style (a chain of unref'd timeouts, one at a time), one way to back off on a store outage
 * and to report it (StoreOutage: a store-error event per failure, one log line per outage and one
 * when it is over), and a stop() that leaves no timer behind and waits for a run in flight.
 */
export abstract class PeriodicService {
  readonly config: PeriodicServiceConfig;
  readonly #outage: StoreOutage;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #abort: AbortController | null = null;
  #failures = 0;

  protected constructor(config: PeriodicServiceConfig, outage: StoreOutage) {
    this.config = validatePeriodicConfig(config);
    this.#outage = outage;
  }

  /** One run of the service's work. A rejection is a failure of the store, reported and backed off. */
  protected abstract work(signal: AbortSignal): Promise<RunOutcome>;

  /** Called by start() before the first run is scheduled. */
  protected onStart(): void {}

  /** Called by stop() once no run is in flight. */
  protected async onStop(): Promise<void> {}

  get started(): boolean {
    return this.#abort !== null;
  }

  start(): void {
    if (this.#abort) return;
    const abort = new AbortController();
    this.#abort = abort;
    this.onStart();
    this.#schedule(this.config.runOnStart ? 0 : this.config.intervalMs, abort.signal);
  }

  /** Stops scheduling, aborts the run in flight (its work stops where it can) and waits for it. */
  async stop(): Promise<void> {
    this.#abort?.abort();
    this.#abort = null;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
    await this.onStop();
  }

  /** One run now, reported to the store outage. Never rejects; `failed` when the store failed. */
  async runOnce(signal?: AbortSignal): Promise<RunOutcome | 'failed'> {
    try {
      const outcome = await this.work(signal ?? this.#abort?.signal ?? NEVER_ABORTED);
      if (outcome !== 'idle') {
        this.#outage.succeeded(this.config.operation);
        this.#failures = 0;
      }
      return outcome;
    } catch (error) {
      this.#failures = this.#outage.failed(this.config.operation, error);
      return 'failed';
    }
  }

  #schedule(delayMs: number, signal: AbortSignal): void {
    this.#timer = setTimeout(() => {
      this.#timer = null;
      const began = performance.now();
      this.#running = this.runOnce(signal).then((outcome) => {
        this.#running = null;
        // Stopped meanwhile (or stopped and started again: that start scheduled its own run).
        if (signal.aborted) return;
        this.#schedule(this.#nextDelay(outcome, performance.now() - began), signal);
      });
    }, delayMs);
    this.#timer.unref();
  }

  #nextDelay(outcome: RunOutcome | 'failed', elapsedMs: number): number {
    if (outcome === 'more') return 0;
    const { intervalMs, maxOutageDelayMs, retrySooner } = this.config;
    if (outcome === 'failed' && retrySooner) return outageDelayMs(this.#failures, maxOutageDelayMs);
    const period =
      outcome === 'failed'
        ? Math.max(intervalMs, outageDelayMs(this.#failures, maxOutageDelayMs))
        : intervalMs;
    // On the period's grid from this run's start: ticks a slow run covered are skipped.
    return period - (elapsedMs % period);
  }
}
