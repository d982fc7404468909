import { tickOf } from './recurring/tick.js';
import {
  decideFailure,
  type ClaimedCommand,
  type Clock,
  type CommandStore,
  type ExecutionInterceptor,
  type Logger,
} from '@asynccmd/core';
import type { CommandEvents } from './command-events.js';
import type { ExecutionContext } from './executor.js';
import type { ExecutorRegistry } from './executor-registry.js';
import { Execution, namedError } from './execution.js';
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
  /**
   * A command became claimable now (wake the claimers): a requeued one this instance let go of, or
   * the next of an ordering key whose command succeeded here.
   */
  readonly onClaimable: () => void;
}

/**
 * Runs claimed commands: holds their lease from claim to recorded outcome, wraps the executor in
 * the interceptors, enforces the per-type timeout, and records success, retry or dead letter
 * (core decideFailure), fenced by the claim token.
 */
export class CommandRunner {
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
    const execution = new Execution(command, entry, via, (e, runner) => this.run(e, runner));
    execution.releaseLease = this.deps.leases.hold(execution);
    execution.drop = () => {
      this.#forget(execution);
      this.#letGo(execution);
    };
    this.#inflight.add(execution);
    if (this.deps.events.listening) this.deps.events.emit({ kind: 'claimed', command, via });
    return execution;
  }

  /** Claims held by this instance, started or not. */
  inflight(): Execution[] {
    return [...this.#inflight];
  }

  /** Runs one claimed command to a recorded outcome. Never rejects. */
  async execute(execution: Execution, runner: string): Promise<void> {
    const tail = await this.run(execution, runner);
    if (tail) await tail.recorded;
  }

  /**
   * Runs one claimed command's executor. Resolves once it has run, with the write of its outcome
   * still under way in `recorded` (a pool frees the slot meanwhile). Never rejects.
   */
  async run(execution: Execution, runner: string): Promise<void | PoolJobTail> {
    if (execution.state !== 'claimed') return this.#forget(execution);
    const { command, entry } = execution;
    execution.state = 'running';
    const { events } = this.deps;
    if (events.listening) events.emit({ kind: 'started', command, mode: entry.mode, runner });
    const started = performance.now();
    const timer =
      entry.timeoutMs === undefined
        ? null
        : setTimeout(
            () =>
              execution.abort(
                'timeout',
                namedError('TimeoutError', `command timed out after ${entry.timeoutMs} ms`),
              ),
            entry.timeoutMs,
          );
    let failure: { error: unknown } | null = null;
    try {
      await this.#invoke(execution);
    } catch (error) {
      failure = { error };
    } finally {
      if (timer) clearTimeout(timer);
      execution.onAbort = null;
    }
    execution.state = 'finishing';
    return { recorded: this.#record(execution, failure, performance.now() - started) };
  }

  /** Writes the outcome (fenced by the claim token), reports it, and lets the claim go. Never rejects. */
  async #record(execution: Execution, failure: { error: unknown } | null, durationMs: number): Promise<void> {
    const { command, entry } = execution;
    const { events, logger } = this.deps;
    try {
      if (failure === null) {
        const done = await this.deps.outcomes.complete(execution.ref);
        if (done === true) {
          if (events.listening) events.emit({ kind: 'succeeded', command, durationMs });
          // The next command of its ordering key can be claimed now, here or elsewhere.
          if (command.orderingKey !== null) this.deps.onClaimable();
        } else this.#notRecorded(execution, done, 'succeeded');
      } else if (execution.abortCause === 'shutdown') {
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
      // A throwing backoff policy or listener must not take the loop down; the lease will lapse
      // and the command be reclaimed.
      logger.error(
        { err: error, id: command.id, type: command.type },
        'asynccmd: recording the outcome failed',
      );
    } finally {
      this.#forget(execution);
    }
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

  #invoke(execution: Execution): Promise<void> {
    const { command, entry } = execution;
    const context = contextOf(execution, this.deps.logger);
    let ran: Promise<unknown>;
    if (this.#interceptors.length === 0) {
      try {
        ran = Promise.resolve(
          entry.executor.execute(command.payload as never, context as ExecutionContext<never>),
        );
      } catch (error) {
        ran = Promise.reject(error);
      }
    } else {
      let next = async (): Promise<void> => {
        await entry.executor.execute(command.payload as never, context as ExecutionContext<never>);
      };
      for (const interceptor of this.#interceptors) {
        const inner = next;
        next = () => interceptor(command, inner);
      }
      ran = Promise.resolve(next());
    }
    execution.ran = ran;
    // An executor that ignores its signal must not hold the slot forever: stop waiting on abort.
    // (A callback on the execution rather than a listener on the signal: no signal unless used.)
    return new Promise<void>((resolve, reject) => {
      if (execution.abortCause !== null) reject(execution.signal.reason);
      else execution.onAbort = reject;
      ran.then(() => resolve(), reject);
    });
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
        if ((await store.releaseRevoked([execution.ref])).length > 0) onClaimable();
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
    execution.releaseLease();
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
 * The ExecutionContext of one attempt. Its signal is made only if the executor asks for it; an own
 * getter, so a spread copy (`{ ...ctx }`) still carries it.
 */
function contextOf(execution: Execution, logger: Logger): ExecutionContext {
  const { command } = execution;
  return {
    id: command.id,
    command,
    attempt: command.retryCount + 1,
    logger,
    tick: tickOf(command.headers),
    get signal() {
      return execution.signal;
    },
  };
}
