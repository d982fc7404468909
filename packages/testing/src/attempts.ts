import type {
  ClaimedCommand,
  CommandEvent,
  CommandId,
  CommandProgress,
  CommandStore,
  Logger,
} from '@asynccmd/core';
import type { CommandEvents } from '@asynccmd/runtime';
import { createInlineRunner, type InlineRunner, type InlineRunnerOptions } from '@asynccmd/runtime/test-kit';

interface AttemptFacts {
  readonly id: CommandId;
  readonly type: string;
  readonly payload: unknown;
  /** 1 for the first attempt, 2 for the first retry, … (the executor's `ctx.attempt`). */
  readonly attempt: number;
  /** The drain round it ran in (1 for runOnce). */
  readonly round: number;
  /**
   * The command's progress once the attempt was over, as the store holds it: what its executor
   * last reported with ctx.progress (this attempt's, or an earlier one's); null when none.
   */
  readonly progress: CommandProgress | null;
}

/**
 * How one attempt ended:
 * - `succeeded`: the command is SUCCESS;
 * - `retried`: it failed with retries left; PENDING again, due at `nextRunAt`;
 * - `dead`: it failed with no retry left; a dead letter;
 * - `fenced`: its outcome was refused because the claim had been taken away while it ran
 *   (an admin kill or requeue, or a reclaim);
 * - `hung`: it had not settled after `hangTimeoutMs` and its executor has no `timeoutMs`; the kit
 *   treats the instance running it as dead (see drainUntilIdle).
 */
export type AttemptReport = AttemptFacts &
  (
    | {
        readonly outcome: 'succeeded';
        /** What the executor left with ctx.setResult, as the store now holds it; null when none. */
        readonly result: unknown;
      }
    | { readonly outcome: 'retried'; readonly error: string; readonly nextRunAt: Date }
    | { readonly outcome: 'dead'; readonly error: string }
    | { readonly outcome: 'fenced' }
    | { readonly outcome: 'hung' }
  );

export type AttemptOutcome = AttemptReport['outcome'];

/** What the runner needs of the kit; `events` are the kit's, what `kit.on` listeners see. */
export type AttemptRunnerDeps = Required<InlineRunnerOptions> & { readonly events: CommandEvents };

type OutcomeEvent = Extract<CommandEvent, { kind: 'succeeded' | 'retried' | 'dead' | 'fenced' }>;

/**
 * Runs claimed commands one at a time through the runtime's own runner (interceptors,
 * timeouts, fenced outcome writes, backoff and dead letters as in production), on a simulated
 * instance that can die: once an attempt hangs, nothing that instance does reaches the store any
 * more, as with a process that stopped, and a fresh instance runs what comes next.
 */
export class AttemptRunner {
  #instance: Instance;

  constructor(private readonly deps: AttemptRunnerDeps) {
    this.#instance = new Instance(deps);
  }

  async run(row: ClaimedCommand, round: number, hangTimeoutMs: number): Promise<AttemptReport> {
    const instance = this.#instance;
    let ended = null as OutcomeEvent | null; // set by the listener below
    let hung = false;
    const stop = instance.runner.on((event) => {
      if (isOutcome(event) && event.command.id === row.id) ended = event;
    });
    try {
      const attempt = instance.runner.start(row);
      const ran = attempt.settled;
      if (!(await settlesWithin(ran, hangTimeoutMs))) {
        const { timeoutMs } = attempt;
        if (timeoutMs !== undefined) {
          // What the runtime's own timer would do after timeoutMs: a failed attempt, retried.
          attempt.abort('timeout', namedError('TimeoutError', `command timed out after ${timeoutMs} ms`));
        } else {
          hung = true;
          instance.die();
          this.#instance = new Instance(this.deps);
          attempt.abort(
            'lease-lost',
            namedError(
              'HungAttemptError',
              `the test kit stopped waiting after ${hangTimeoutMs} ms and treats this instance as dead`,
            ),
          );
        }
        await ran;
      }
    } finally {
      stop();
    }
    const stored = await this.deps.store.get(row.id);
    const progress = stored?.progress ?? null;
    if (hung) return { ...facts(row, round, progress), outcome: 'hung' };
    if (ended === null) {
      // The runner could not record it (e.g. a backoff policy threw): a bug the test should see.
      const cause = instance.lastLoggedError;
      throw new Error(
        `the outcome of command ${row.id} (${row.type}) was not recorded` +
          (cause instanceof Error ? `: ${cause.message}` : ''),
        { cause },
      );
    }
    // A success's result as the store now holds it: what the application will read.
    const result = ended.kind === 'succeeded' ? (stored?.result ?? null) : null;
    return report(facts(row, round, progress), ended, result);
  }
}

/** One simulated process: its runner, and a switch that kills it. */
class Instance {
  readonly runner: InlineRunner;
  #alive = true;
  /** The `err` of the runner's last error log line: why an outcome could not be recorded. */
  lastLoggedError: unknown = undefined;

  constructor(deps: AttemptRunnerDeps) {
    const store = cutOffWhenDead(deps.store, () => this.#alive);
    const logger: Logger = {
      debug: (obj, msg) => deps.logger.debug(obj, msg),
      info: (obj, msg) => deps.logger.info(obj, msg),
      warn: (obj, msg) => deps.logger.warn(obj, msg),
      error: (obj, msg) => {
        if ('err' in obj) this.lastLoggedError = obj.err;
        deps.logger.error(obj, msg);
      },
    };
    // Leases are never renewed, but they follow the test clock: nothing lapses unless the test
    // advances past a lease.
    this.runner = createInlineRunner({
      store,
      registry: deps.registry,
      clock: deps.clock,
      logger,
      interceptors: deps.interceptors,
      maxResultBytes: deps.maxResultBytes,
      redactError: deps.redactError,
      // Transactional executors run in the kit client's transactions on the same database; a hung
      // one is aborted, which rolls its transaction back.
      client: deps.client,
    });
    this.runner.on((event) => {
      if (this.#alive) deps.events.emit(event);
    });
  }

  die(): void {
    this.#alive = false;
    this.runner.giveUp();
  }
}

/** The store as a dead instance sees it: every call fails, so none of its writes lands. */
function cutOffWhenDead<Tx>(store: CommandStore<Tx>, alive: () => boolean): CommandStore<Tx> {
  return new Proxy(store, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]): unknown =>
        alive()
          ? (value as (...a: unknown[]) => unknown).apply(target, args)
          : Promise.reject(new Error('this test instance was declared dead: it no longer reaches the store'));
    },
  });
}

function isOutcome(event: CommandEvent): event is OutcomeEvent {
  return (
    event.kind === 'succeeded' || event.kind === 'retried' || event.kind === 'dead' || event.kind === 'fenced'
  );
}

function facts(row: ClaimedCommand, round: number, progress: CommandProgress | null): AttemptFacts {
  return { id: row.id, type: row.type, payload: row.payload, attempt: row.retryCount + 1, round, progress };
}

function report(base: AttemptFacts, ended: OutcomeEvent, result: unknown): AttemptReport {
  switch (ended.kind) {
    case 'succeeded':
      return { ...base, outcome: 'succeeded', result };
    case 'retried':
      return { ...base, outcome: 'retried', error: ended.error, nextRunAt: ended.nextRunAt };
    case 'dead':
      return { ...base, outcome: 'dead', error: ended.error };
    case 'fenced':
      return { ...base, outcome: 'fenced' };
  }
}

/** Whether `work` settles within `ms` of real time (it is never rejected: the runner never rejects). */
async function settlesWithin(work: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([work.then(() => true as const), late]);
  } finally {
    clearTimeout(timer);
  }
}

function namedError(name: string, message: string): Error {
  const error = new Error(message);
  error.name = name;
  return error;
}
