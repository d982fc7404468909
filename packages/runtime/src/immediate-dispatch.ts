import type { Clock, CommandId, CommandStore, TokenSource } from '@asynccmd/core';
import type { CommandRunner } from './command-runner.js';
import type { Dispatcher } from './dispatcher.js';
import type { ExecutorRegistry } from './executor-registry.js';
import type { StoreOutage } from './store-outage.js';

export interface ImmediateDispatchDeps {
  readonly store: CommandStore;
  readonly registry: ExecutorRegistry;
  readonly runner: CommandRunner;
  readonly dispatcher: Dispatcher;
  readonly clock: Clock;
  readonly tokens: TokenSource;
  readonly outage: StoreOutage;
  /** False before start and once stopping: then the poll loop (here or elsewhere) runs them. */
  readonly accepting: () => boolean;
}

/**
 * IMMEDIATE mode after commit: claims each command by id (atomic; null means another instance or
 * the poll loop got it first) and hands it to its pool — or runs it here when the pool is full.
 * If this fails or the process dies first, the command is still PENDING and the poll loop claims it.
 */
export class ImmediateDispatch {
  readonly #types: string[];
  readonly #leaseMs: number;

  constructor(private readonly deps: ImmediateDispatchDeps) {
    const entries = deps.registry.entries().filter((e) => e.mode === 'IMMEDIATE');
    this.#types = entries.map((e) => e.type);
    // One claim statement per id must pick one lease; the longest is safe, and the next heartbeat
    // sets each command's own.
    this.#leaseMs = Math.max(0, ...entries.map((e) => e.leaseMs));
  }

  /**
   * Claims and dispatches each id in turn; caller-runs work runs here before the next id is claimed
   * (back-pressure on the submitter). Returns how many were not claimed here (not IMMEDIATE, taken
   * by someone else, or left to the poll loop). Never rejects: the transaction has committed.
   */
  async dispatch(ids: readonly CommandId[]): Promise<number> {
    const { store, runner, dispatcher, clock, tokens, outage } = this.deps;
    if (this.#types.length === 0) return ids.length;
    let claimed = 0;
    for (const id of ids) {
      if (!this.deps.accepting()) break;
      let row;
      try {
        row = await store.claimById({
          id,
          now: clock.now(),
          token: tokens.next(),
          leaseMs: this.#leaseMs,
          types: this.#types,
        });
        outage.succeeded('claimById');
      } catch (error) {
        outage.failed('claimById', error);
        break;
      }
      if (!row) continue;
      claimed++;
      const runHere = dispatcher.dispatch(runner.track(row, 'immediate'));
      if (runHere) await runHere();
    }
    return ids.length - claimed;
  }
}
