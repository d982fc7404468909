// @asynccmd/runtime/test-kit: for test kits (such as @asynccmd/testing) that run claimed commands
// themselves, inline and one at a time, instead of through a started runtime's scheduler and pools.
import { redactErrorText, LIMITS } from '@asynccmd/core';
import type {
  ClaimedCommand,
  Clock,
  CommandEventListener,
  CommandStore,
  ExecutionInterceptor,
  Logger,
} from '@asynccmd/core';
import type { ExecutorTransactions } from './attempt-transaction.js';
import { CommandEvents } from './command-events.js';
import { CommandRunner } from './command-runner.js';
import type { ExecutorRegistry } from './executor-registry.js';
import { LeaseKeeper } from './services/lease-keeper.js';
import { OutcomeWriter } from './outcome-writer.js';
import { StoreOutage } from './store-outage.js';

export interface InlineRunnerOptions<Tx = unknown> {
  /** Where outcomes are written. */
  readonly store: CommandStore<Tx>;
  /** The executors, as a runtime registered them (`commands.registry`). */
  readonly registry: ExecutorRegistry;
  /** The application clock retries are scheduled on. */
  readonly clock: Clock;
  readonly logger: Logger;
  /** Wrap every execution, outermost first (as the runtime's option). */
  readonly interceptors?: readonly ExecutionInterceptor[];
  /** The largest result `ctx.setResult` takes (as the runtime's option). */
  readonly maxResultBytes?: number;
  /** Rewrites a failure's error text before it is stored (as the runtime's option; default core redactErrorText). */
  readonly redactError?: (text: string) => string;
  /**
   * The client of the runtime whose registry this is (`commands.client`): a transactional
   * executor's attempt runs in its transaction, with submits in it, and its SUCCESS commits with
   * them. Without it, a transactional attempt fails.
   */
  readonly client?: ExecutorTransactions;
}

export type { ExecutorTransactions };

/** One attempt under way. */
export interface InlineAttempt {
  /** Resolves once the outcome is written, refused (fenced) or given up. Never rejects. */
  readonly settled: Promise<void>;
  /** The executor's `timeoutMs`, when it has one. */
  readonly timeoutMs: number | undefined;
  /**
   * Aborts the executor's signal and stops waiting for it, as the runtime does when the timeout
   * passes ('timeout': the attempt fails and is retried or dead-lettered) or when the claim was
   * taken away while it ran ('lease-lost').
   */
  abort(cause: 'timeout' | 'lease-lost', error: Error): void;
}

export interface InlineRunner {
  /**
   * Runs one attempt of a command claimed from the store (with its executor's lease) through the
   * runtime's own execution path: interceptors, timeout, the token-fenced outcome write, backoff
   * and dead letters, with the same events a started runtime emits.
   */
  start(command: ClaimedCommand): InlineAttempt;
  /** Subscribes to the CommandEvents of this runner's attempts; returns the unsubscribe function. */
  on(listener: CommandEventListener): () => void;
  /** Outcome writes still retrying against an unreachable store stop trying (the instance is gone). */
  giveUp(): void;
}

/**
 * A runner without scheduler, pools or heartbeats: nothing runs unless `start` is called, and a
 * claim's lease is never renewed, so it lapses when the store's clock passes it.
 */
export function createInlineRunner<Tx>(options: InlineRunnerOptions<Tx>): InlineRunner {
  const store = options.store as CommandStore;
  const events = new CommandEvents(options.logger);
  const outage = new StoreOutage(events, options.logger);
  const outcomes = new OutcomeWriter(store, outage);
  const client = options.client;
  const runner = new CommandRunner({
    store,
    registry: options.registry,
    events,
    clock: options.clock,
    logger: options.logger,
    interceptors: options.interceptors ?? [],
    // Never started: an inline attempt keeps its claim only for as long as its lease lasts.
    leases: new LeaseKeeper(store, outage, 1_000),
    outcomes,
    outage,
    maxResultBytes: options.maxResultBytes ?? LIMITS.defaultResultBytes,
    redactError: options.redactError ?? redactErrorText,
    // A test kit drains in rounds: a requeued claim let go of is claimed in the next one.
    onClaimable: () => undefined,
    transactions: client === undefined ? null : () => client,
  });
  return {
    start(command) {
      // Claimed just before (the kit's drains start what they claim at once).
      const execution = runner.track(command, 'poll', performance.now());
      return {
        settled: runner.execute(execution, 'inline'),
        timeoutMs: execution.entry.timeoutMs,
        abort: (cause, error) => execution.abort(cause, error),
      };
    },
    on: (listener) => events.on(listener),
    giveUp: () => {
      outcomes.giveUp();
      runner.giveUp();
    },
  };
}
