import { tickOf, type RecurringTick } from './recurring/tick.js';
import * as E from 'fp-ts/lib/Either.js';
import {
  decideFailure,
  serialiseResult,
  type ClaimedCommand,
  type Clock,
  type CommandStore,
  type ExecutionInterceptor,
  type Logger,
} from '@asynccmd/core';
import type { CommandEvents } from './command-events.js';
import type { ExecutionContext } from './executor.js';
import type { ExecutorRegistry } from './executor-registry.js';
import { Execution, namedError, type ExecutionHost } from './execution.js';
import type { LeaseKeeper } from './services/lease-keeper.js';
import { ABANDONED, type OutcomeWriter, type WriteResult } from './outcome-writer.js';
import type { StoreOutage } from './store-outage.js';
import type { PoolJobTail } from './work-pool.js';

export interface CommandRunnerDeps {
  readonly store: CommandStore;
  readonly registry: ExecutorRegistry;
  readonly events: CommandEvents;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly interceptors: readonly ExecutionInterceptor[];
  readonly leases: LeaseKeeper;
  readonly outcomes: OutcomeWriter;
  readonly outage: StoreOutage;
  /** The largest result `ctx.setResult` takes, as JSON bytes. */
  readonly maxResultBytes: number;
  /**
   * A command became claimable now (wake the claimers): a requeued one this instance let go of
   * (`released`), or the next of an ordering key whose command succeeded here (`succeeded`).
   */
  readonly onClaimable: (by: 'released' | 'succeeded') => void;
}

/**
 * Runs claimed commands: holds their lease from claim to recorded outcome, wraps the executor in
 * the interceptors, enforces the per-type timeout, and records success, retry or dead letter
 * (core decideFailure), fenced by the claim token.
 */
export class CommandRunner implements ExecutionHost {
  readonly #inflight = new Set<Execution>();
  #idle: (() => void)[] = [];
  /** Innermost first, so wrapping in this order leaves the first interceptor outermost. */
  readonly #interceptors: readonly ExecutionInterceptor[];

  constructor(private readonly deps: CommandRunnerDeps) {
    this.#interceptors = [...deps.interceptors].reverse();
  }

  /** Takes charge of a freshly claimed command: from now on its lease is kept alive. */
  track(command: ClaimedCommand, via: 'poll' | 'immediate'): Execution {
    const entry = this.deps.registry.require(command.type);
    const execution = new Execution(command, entry, via, this);
    this.deps.leases.hold(execution);
    this.#inflight.add(execution);
    if (this.deps.events.listensTo('claimed')) this.deps.events.emit({ kind: 'claimed', command, via });
    return execution;
  }

  /** Forgets a claim taken away before it started; it never runs. */
  drop(execution: Execution): void {
    this.#forget(execution);
    this.#letGo(execution);
  }

  /** Claims held by this instance, started or not. */
  inflight(): Execution[] {
    return [...this.#inflight];
  }

  /** Runs one claimed command to a recorded outcome. Never rejects. */
  async execute(execution: Execution, runner: 'inline' | 'caller'): Promise<void> {
    const tail = await this.run(execution, runner);
    if (tail) await tail.recorded;
  }

  /**
   * Runs one claimed command's executor (`runner`: where, for the started event; null: its pool).
   * Resolves once it has run, with the write of its outcome still under way in `recorded` (a pool
   * frees the slot meanwhile). Never rejects. The hot path of every command: an executor that
   * returns without a promise costs no promise of its own, one that returns a promise one more.
   */
  run(execution: Execution, runner: string | null): Promise<void | PoolJobTail> {
    if (execution.state !== 'claimed') {
      this.#forget(execution);
      return NOTHING;
    }
    const { command, entry } = execution;
    execution.state = 'running';
    const { events } = this.deps;
    if (events.listensTo('started')) {
      const where = runner ?? `pool:${execution.poolName ?? '?'}`;
      events.emit({ kind: 'started', command, mode: entry.mode, runner: where });
    }
    const started = performance.now();
    if (entry.timeoutMs !== undefined) {
      const ms = entry.timeoutMs;
      execution.timer = setTimeout(
        () => execution.abort('timeout', namedError('TimeoutError', `command timed out after ${ms} ms`)),
        ms,
      );
    }
    let ran: unknown;
    try {
      ran = this.#invoke(execution);
    } catch (error) {
      return Promise.resolve(this.#ran(execution, { error }, started));
    }
    if (!isThenable(ran)) {
      // Done already (an aborted signal still fails it, as it would an executor that awaited).
      const failure = execution.abortCause === null ? null : { error: execution.signal.reason };
      return Promise.resolve(this.#ran(execution, failure, started));
    }
    const running = ran instanceof Promise ? (ran as Promise<unknown>) : Promise.resolve(ran);
    execution.ran = running;
    // An executor that ignores its signal must not hold the slot forever: stop waiting on abort.
    // (A callback on the execution rather than a listener on the signal: no signal unless used.)
    return new Promise((resolve) => {
      const finish = (failure: { error: unknown } | null): void => {
        if (execution.state === 'running') resolve(this.#ran(execution, failure, started));
      };
      if (execution.abortCause !== null) finish({ error: execution.signal.reason });
      else execution.onAbort = (reason) => finish({ error: reason });
      running.then(
        () => finish(null),
        (error: unknown) => finish({ error }),
      );
    });
  }

  /** The executor is over (or given up on): its slot is free, its outcome goes to be written. */
  #ran(execution: Execution, failure: { error: unknown } | null, started: number): PoolJobTail {
    if (execution.timer !== null) {
      clearTimeout(execution.timer);
      execution.timer = null;
    }
    execution.onAbort = null;
    execution.state = 'finishing';
    return { recorded: this.#record(execution, failure, performance.now() - started) };
  }

  /** Writes the outcome (fenced by the claim token), reports it, and lets the claim go. Never rejects. */
  #record(execution: Execution, failure: { error: unknown } | null, durationMs: number): Promise<void> {
    if (failure !== null) return this.#recordFailure(execution, failure, durationMs);
    const { ref, resultJson } = execution;
    const attempt = resultJson === undefined ? ref : { ...ref, resultJson };
    return this.deps.outcomes.complete(attempt).then(
      (done) => {
        try {
          if (done !== true) this.#notRecorded(execution, done, 'succeeded');
          else {
            if (this.deps.events.listensTo('succeeded')) {
              this.deps.events.emit({ kind: 'succeeded', command: execution.command, durationMs });
            }
            // The next command of its ordering key can be claimed now, here or elsewhere.
            if (execution.command.orderingKey !== null) this.deps.onClaimable('succeeded');
          }
        } catch (error) {
          this.#recordingFailed(execution, error);
        } finally {
          this.#forget(execution);
        }
      },
      (error: unknown) => {
        this.#recordingFailed(execution, error);
        this.#forget(execution);
      },
    );
  }

  async #recordFailure(execution: Execution, failure: { error: unknown }, durationMs: number): Promise<void> {
    const { command, entry } = execution;
    const { events, logger } = this.deps;
    try {
      if (execution.abortCause === 'shutdown') {
        // Stopped by shutdown, not by its own fault: back to PENDING with nothing counted against it.
        await this.release([execution]);
      } else {
        const outcome = decideFailure(command, failure.error, this.deps.clock.now(), entry.backoff);
        const done = await this.deps.outcomes.fail(execution.ref, outcome);
        if (done === true) {
          const error = outcome.lastError;
          if (outcome.status === 'DEAD') {
            events.emit({ kind: 'dead', command, durationMs, error });
            logger.error({ id: command.id, type: command.type, error }, 'asynccmd: command is DEAD');
          } else {
            events.emit({ kind: 'retried', command, durationMs, error, nextRunAt: outcome.nextRunAt });
            logger.warn(
              { id: command.id, type: command.type, error, nextRunAt: outcome.nextRunAt },
              'asynccmd: command failed; retry scheduled',
            );
          }
        } else this.#notRecorded(execution, done, 'failed');
      }
    } catch (error) {
      this.#recordingFailed(execution, error);
    } finally {
      this.#forget(execution);
    }
  }

  /**
   * A throwing backoff policy or listener must not take the loop down; the lease will lapse and
   * the command be reclaimed.
   */
  #recordingFailed(execution: Execution, error: unknown): void {
    const { command } = execution;
    this.deps.logger.error(
      { err: error, id: command.id, type: command.type },
      'asynccmd: recording the outcome failed',
    );
  }

  /** Puts claimed-but-unstarted commands back to PENDING (shutdown). Never rejects. */
  async release(executions: readonly Execution[]): Promise<void> {
    const mine = executions.filter((e) => e.state === 'claimed' || e.abortCause === 'shutdown');
    for (const e of mine) e.state = 'finishing';
    if (mine.length === 0) return;
    try {
      const released = new Set(await this.deps.store.release(mine.map((e) => e.ref)));
      this.deps.outage.succeeded('release');
      for (const e of mine) {
        if (released.has(e.command.id)) {
          this.deps.events.emit({ kind: 'released', id: e.command.id, type: e.command.type });
        }
      }
    } catch (error) {
      // Their leases will expire and the hung reclaimer will take them back.
      this.deps.outage.failed('release', error);
    } finally {
      for (const e of mine) this.#forget(e);
    }
  }

  /** Calls the executor inside the interceptors: what it returned, or it throws. */
  #invoke(execution: Execution): unknown {
    const { command, entry } = execution;
    const context = contextOf(execution, this.deps) as ExecutionContext<never>;
    if (this.#interceptors.length === 0) return entry.executor.execute(command.payload as never, context);
    let next = async (): Promise<void> => {
      await entry.executor.execute(command.payload as never, context);
    };
    for (const interceptor of this.#interceptors) {
      const inner = next;
      next = () => interceptor(command, inner);
    }
    return next();
  }

  /**
   * A claim taken away while this instance held it: once its executor has really stopped (not
   * just been given up on), say so, and a requeued command is claimable at once rather than when
   * the old lease runs out. Never rejects; if it fails, the lease runs out by itself.
   */
  #letGo(execution: Execution): void {
    const { store, logger, onClaimable } = this.deps;
    void execution.executorSettled.then(async () => {
      try {
        if ((await store.releaseRevoked([execution.ref])).length > 0) onClaimable('released');
      } catch (error) {
        logger.debug(
          { err: error, id: execution.command.id },
          'asynccmd: letting go of a requeued claim failed; its lease will run out',
        );
      }
    });
  }

  #notRecorded(execution: Execution, result: WriteResult, outcome: 'succeeded' | 'failed'): void {
    const { command } = execution;
    if (result === ABANDONED) {
      this.deps.logger.error(
        { id: command.id, type: command.type, outcome },
        'asynccmd: outcome not recorded before shutdown; the command will be reclaimed and run again',
      );
      return;
    }
    this.#letGo(execution);
    this.deps.events.emit({ kind: 'fenced', command, outcome });
    this.deps.logger.warn(
      { id: command.id, type: command.type, outcome },
      'asynccmd: outcome refused: the claim had been taken away (reclaimed, requeued or killed)',
    );
  }

  /** Resolves once this instance holds no claim. */
  whenIdle(): Promise<void> {
    if (this.#inflight.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #forget(execution: Execution): void {
    execution.state = 'done';
    this.deps.leases.release(execution);
    this.#inflight.delete(execution);
    if (this.#inflight.size === 0 && this.#idle.length > 0) {
      const idle = this.#idle;
      this.#idle = [];
      for (const resolve of idle) resolve();
    }
  }

  /** Aborts running executions (shutdown deadline passed). */
  abortRunning(): void {
    for (const e of this.#inflight) {
      if (e.state === 'running')
        e.abort('shutdown', namedError('ShutdownError', 'the instance is shutting down'));
    }
  }
}

/**
 * The ExecutionContext of one attempt. Its signal is made only if the executor asks for it, through
 * an own getter, so a spread copy (`{ ...ctx }`) still carries it. A class with that getter defined
 * from one shared descriptor: an object literal with a getter of its own (a new closure and
 * accessor per command) cost several times more to build, on every command.
 */
class AttemptContext implements ExecutionContext {
  readonly id: string;
  readonly command: ClaimedCommand;
  readonly attempt: number;
  readonly tick: RecurringTick | null;
  declare readonly signal: AbortSignal;
  readonly logger: Logger;
  readonly #execution: Execution;
  readonly #maxResultBytes: number;

  constructor(execution: Execution, settings: Pick<CommandRunnerDeps, 'logger' | 'maxResultBytes'>) {
    const { command } = execution;
    this.id = command.id;
    this.command = command;
    this.attempt = command.retryCount + 1;
    this.tick = tickOf(command.headers);
    this.logger = settings.logger;
    this.#execution = execution;
    this.#maxResultBytes = settings.maxResultBytes;
    Object.defineProperty(this, 'signal', SIGNAL);
  }

  setResult(result: unknown): void {
    const json = serialiseResult(result, this.#maxResultBytes);
    if (E.isLeft(json)) throw json.left;
    // Once the attempt is over (given up on by a timeout, say), nothing it leaves is kept.
    if (this.#execution.state === 'running') this.#execution.resultJson = json.right;
  }

  static signalOf(context: AttemptContext): AbortSignal {
    return context.#execution.signal;
  }
}

const SIGNAL: PropertyDescriptor = {
  get(this: AttemptContext) {
    return AttemptContext.signalOf(this);
  },
  enumerable: true,
};

function contextOf(
  execution: Execution,
  settings: Pick<CommandRunnerDeps, 'logger' | 'maxResultBytes'>,
): ExecutionContext {
  return new AttemptContext(execution, settings);
}

const NOTHING: Promise<void> = Promise.resolve();

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}
