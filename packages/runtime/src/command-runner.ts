import { tickOf, type RecurringTick } from './recurring/tick.js';
import * as E from 'fp-ts/lib/Either.js';
import {
  decideFailure,
  decideShutdownAbort,
  describeFailure,
  redactErrorText,
  truncateErrorText,
  serialiseResult,
  requireProgress,
  type ClaimedCommand,
  type Clock,
  type CommandProgress,
  type CommandStore,
  type DependencyOutcome,
  type ExecutionInterceptor,
  type Logger,
  type TransactionalCompletion,
  type AttemptSavepoints,
  TransactionRolledBackError,
  type CompletedAttempt,
} from '@asynccmd/core';
import { AttemptTransaction, type ExecutorTransactions } from './attempt-transaction.js';
import type { IdempotentSubmitOptions, SubmitItem } from './client.js';
import type { CommandEvents } from './command-events.js';
import type { CommandTypeMap, ExecutionContext, TransactionalContext } from './executor.js';
import type { ExecutorRegistry } from './executor-registry.js';
import { Execution, namedError, type ExecutionHost } from './execution.js';
import type { LeaseKeeper } from './services/lease-keeper.js';
import { ABANDONED, type OutcomeWriter, type WriteResult } from './outcome-writer.js';
import { outageDelayMs, pause, type StoreOutage } from './store-outage.js';
import type { DependentSubmitOptions } from './submit-validation.js';
import type { PoolJobTail } from './work-pool.js';
import { ProgressWriter } from './progress-writer.js';
import { DEFAULT_TRANSACTION_GROUP, GROUP_MS } from './transaction-group.js';
import type { AttemptWorkflow } from './workflow.js';

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
  /** Rewrites a failure's error text before it is stored (options `redactError`). */
  readonly redactError: (text: string) => string;
  /**
   * A command became claimable now (wake the claimers): a requeued one this instance let go of
   * (`released`), or the next of an ordering key whose command succeeded here (`succeeded`).
   */
  readonly onClaimable: (by: 'released' | 'succeeded') => void;
  /**
   * The client, for transactional executors: their transactions, submits and after-commit work
   * (a function: the client is built after the runner). Null where there is none (the inline
   * runner of test kits): a transactional attempt then fails.
   */
  readonly transactions: (() => ExecutorTransactions) | null;
  /**
   * A claimed transactional command waiting in the same pool as `after` that may join its
   * transaction now (not started, its lease with time to spare), taken out of the queue; null when
   * there is none. Absent: every transactional attempt has a transaction of its own.
   */
  readonly nextTransactional?: (after: Execution) => Execution | null;
  /** Most attempts one transaction takes (1: none joins another); default DEFAULT_TRANSACTION_GROUP. */
  readonly transactionGroupSize?: number;
  /** How long a shared transaction takes further attempts after its BEGIN; default GROUP_MS. */
  readonly transactionGroupMs?: number;
}

/** How a transactional attempt's transaction ended. */
type TransactionEnd =
  | { readonly kind: 'committed' }
  /** The fenced completion found the claim taken away: rolled back, no outcome written. */
  | { readonly kind: 'fenced' }
  /** Rolled back (the executor threw or was given up on, or a statement failed before the completion). */
  | { readonly kind: 'failed'; readonly error: unknown }
  /** The completion or COMMIT failed: committed or not, the row tells. */
  | { readonly kind: 'uncertain'; readonly error: unknown; readonly attempt: AttemptTransaction }
  /** Undone with an attempt that shared its transaction (fenced out, or failed): it runs again. */
  | { readonly kind: 'displaced' };

/** One attempt of a transaction that several share, each in a savepoint of its own. */
interface GroupMember {
  readonly execution: Execution;
  readonly started: number;
  /** Its savepoint; null for the first, undone only with the whole transaction. */
  readonly savepoint: string | null;
  scope: AttemptTransaction | null;
  end: TransactionEnd | null;
  /** What its SUCCESS writes once it has returned; null when it failed. */
  completed: CompletedAttempt | null;
  durationMs: number;
}

function groupMember(execution: Execution, started: number, savepoint: string | null): GroupMember {
  return { execution, started, savepoint, scope: null, end: null, completed: null, durationMs: 0 };
}

const CAUGHT_STATEMENT_FAILURE =
  'a statement of the attempt failed and its error was caught: the transaction refused everything after it';

/** The executor is over (or given up on): its timeout stops, and its outcome is next. */
function finishing(execution: Execution): void {
  if (execution.timer !== null) {
    clearTimeout(execution.timer);
    execution.timer = null;
  }
  execution.onAbort = null;
  execution.state = 'finishing';
}

/** Thrown inside a transactional attempt's transaction to roll it back. */
const ROLL_BACK: unique symbol = Symbol('roll back');

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
  /** Aborted when shutdown gives up on outcome writes: the settling of a lost COMMIT stops too. */
  readonly #givenUp = new AbortController();
  /** Transactional attempts lost through no fault of their own since the last one that committed. */
  #transientLosses = 0;
  /** Where ctx.progress reports go, throttled. */
  readonly #progress: ProgressWriter;
  /** What every attempt's context is made with. */
  readonly #contextSettings: ContextSettings;

  constructor(private readonly deps: CommandRunnerDeps) {
    this.#interceptors = [...deps.interceptors].reverse();
    this.#progress = new ProgressWriter(deps.store, deps.logger);
    this.#contextSettings = {
      logger: deps.logger,
      maxResultBytes: deps.maxResultBytes,
      store: deps.store,
      progress: this.#progress,
    };
  }

  /**
   * Takes charge of a freshly claimed command: from now on its lease is kept alive. `claimSentAt`
   * is when the claim's statement was sent (performance.now()): its lease runs from no earlier.
   */
  track(command: ClaimedCommand, via: 'poll' | 'immediate', claimSentAt: number): Execution {
    const entry = this.deps.registry.require(command.type);
    const execution = new Execution(command, entry, via, this, claimSentAt);
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
    const started = performance.now();
    // A claim that waited (a slow claim round, a long queue, heartbeats held up) may have too
    // little lease left: started now, it could be reclaimed and run elsewhere while it runs here.
    if (this.deps.leases.mayLapse(execution, started)) return this.#renewThenRun(execution, runner);
    this.#begin(execution, runner);
    if (execution.entry.transactional) return this.#runInTransaction(execution, started);
    let ran: unknown;
    try {
      ran = this.#invoke(execution, new AttemptContext(execution, this.#contextSettings));
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

  /** The executor is about to run: say so, and start its timeout. */
  #begin(execution: Execution, runner: string | null): void {
    const { command, entry } = execution;
    execution.state = 'running';
    const { events } = this.deps;
    if (events.listensTo('started')) {
      const where = runner ?? `pool:${execution.poolName ?? '?'}`;
      events.emit({ kind: 'started', command, mode: entry.mode, runner: where });
    }
    if (entry.timeoutMs !== undefined) {
      const ms = entry.timeoutMs;
      execution.timer = setTimeout(
        () => execution.abort('timeout', namedError('TimeoutError', `command timed out after ${ms} ms`)),
        ms,
      );
    }
  }

  /**
   * Renews the leases first (one heartbeat for all held), then runs `execution` if it is still
   * held with time left; otherwise it goes back to PENDING unstarted (or, found taken away, is
   * dropped): a command is never started on a lease that may lapse under it.
   */
  async #renewThenRun(execution: Execution, runner: string | null): Promise<void | PoolJobTail> {
    const renewed = await this.deps.leases.renewNow();
    if (execution.state !== 'claimed') return; // taken away meanwhile: dropped, never run
    if (!renewed || this.deps.leases.mayLapse(execution, performance.now())) {
      await this.release([execution]);
      return;
    }
    return this.run(execution, runner);
  }

  /** The executor is over (or given up on): its slot is free, its outcome goes to be written. */
  #ran(execution: Execution, failure: { error: unknown } | null, started: number): PoolJobTail {
    finishing(execution);
    return { recorded: this.#record(execution, failure, performance.now() - started) };
  }

  /** Writes the outcome (fenced by the claim token), reports it, and lets the claim go. Never rejects. */
  #record(execution: Execution, failure: { error: unknown } | null, durationMs: number): Promise<void> {
    // Progress not written yet goes first (most executors report none: nothing to wait for).
    if (this.#progress.holds(execution)) {
      return this.#progress.settle(execution).then(() => this.#recordOutcome(execution, failure, durationMs));
    }
    return this.#recordOutcome(execution, failure, durationMs);
  }

  #recordOutcome(
    execution: Execution,
    failure: { error: unknown } | null,
    durationMs: number,
  ): Promise<void> {
    if (failure !== null) return this.#recordFailure(execution, failure, durationMs);
    const { ref, resultJson } = execution;
    const attempt = resultJson === undefined ? ref : { ...ref, resultJson };
    return this.deps.outcomes.complete(attempt).then(
      (done) => {
        try {
          if (done !== true) this.#notRecorded(execution, done, 'succeeded');
          else this.#succeeded(execution, durationMs);
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

  /** Reports a recorded SUCCESS. */
  #succeeded(execution: Execution, durationMs: number): void {
    if (this.deps.events.listensTo('succeeded')) {
      this.deps.events.emit({ kind: 'succeeded', command: execution.command, durationMs });
    }
    // The next command of its ordering key can be claimed now, here or elsewhere.
    if (execution.command.orderingKey !== null) this.deps.onClaimable('succeeded');
  }

  /**
   * Runs a transactional executor in a transaction of the client's (so what it submits is
   * dispatched after the commit) and, once it has returned, writes the fenced SUCCESS in that same
   * transaction and commits: the executor's writes, its submits and the SUCCESS commit together.
   * The completion fenced out rolls everything back (the claim was taken away: no outcome); the
   * executor throwing, timing out or losing its claim rolls it back, and the failure is recorded
   * outside it, as for any executor. Resolves once the transaction is over; the slot is held
   * that long, as is a connection.
   */
  async #runInTransaction(execution: Execution, started: number): Promise<PoolJobTail> {
    const completion = this.deps.store.transactionalCompletion;
    const client = this.deps.transactions?.();
    let end: TransactionEnd;
    if (completion === undefined || client === undefined) {
      const error = namedError(
        'TransactionalExecutorError',
        'a transactional executor needs a runtime whose store completes in transactions',
      );
      end = { kind: 'failed', error };
    } else if (
      completion.savepoints !== undefined &&
      execution.entry.opener === null &&
      this.deps.nextTransactional !== undefined &&
      (this.deps.transactionGroupSize ?? DEFAULT_TRANSACTION_GROUP) > 1
    ) {
      return this.#runGroup(execution, started, completion, completion.savepoints, client);
    } else {
      end = await this.#transact(execution, completion, client);
    }
    finishing(execution);
    const durationMs = performance.now() - started;
    return { recorded: this.#recordTransactionEnd(execution, end, durationMs) };
  }

  async #transact(
    execution: Execution,
    completion: TransactionalCompletion,
    client: ExecutorTransactions,
  ): Promise<TransactionEnd> {
    let attempt: AttemptTransaction | null = null;
    let end: TransactionEnd | null = null;
    let completing = false;
    let completedAtCommit = false;
    // The store's own transaction, or the ORM's through its bridge's opener: then the executor gets
    // the ORM's transaction object, and submits and the SUCCESS go through the SqlExecutor over it
    // (whose commit hooks dispatch what it submitted, as client.transaction does).
    const opener = execution.entry.opener;
    const transaction = (fn: (tx: unknown, exposed: unknown) => Promise<void>): Promise<void> =>
      opener === null
        ? client.transaction((tx) => fn(tx, tx))
        : opener.transaction((ormTx, executor) => fn(executor, ormTx));
    try {
      await transaction(async (tx, exposed) => {
        const scope = new AttemptTransaction(tx, client, execution.command.id, exposed);
        attempt = scope;
        const failure = await this.#attemptIn(execution, scope);
        if (failure !== null) {
          end = { kind: 'failed', error: failure.error };
          throw ROLL_BACK;
        }
        const { ref, resultJson } = execution;
        // The last progress before the SUCCESS, from inside the transaction: on SQLite a write from
        // outside it would wait for it to end.
        if (this.#progress.holds(execution)) await this.#progress.settle(execution, false);
        completing = true;
        const completed = resultJson === undefined ? ref : { ...ref, resultJson };
        // Where the store can, the SUCCESS goes out with the COMMIT, in one round trip: then the
        // commit tells whether the claim still held.
        if (completion.claimLost !== undefined && completion.completeAtCommit?.(tx, completed) === true) {
          completedAtCommit = true;
          return;
        }
        if (!(await completion.complete(tx, completed))) {
          end = { kind: 'fenced' };
          throw ROLL_BACK;
        }
      });
      return { kind: 'committed' };
    } catch (error) {
      if (error === ROLL_BACK && end !== null) return end;
      if (completedAtCommit && completion.claimLost?.(error) === true) return { kind: 'fenced' };
      if (completing && attempt !== null) return { kind: 'uncertain', error, attempt };
      // Nothing was committed: opening the transaction, or a statement before the completion, failed.
      return { kind: 'failed', error };
    }
  }

  /**
   * Runs transactional attempts one after another in one transaction, each in a savepoint of its
   * own, while more wait in the pool (up to `transactionGroupSize`, for up to `transactionGroupMs`): one BEGIN, one
   * fenced SUCCESS statement and one COMMIT for all of them. With nothing waiting behind it, the
   * first attempt runs as it would alone (no savepoint, its SUCCESS with the COMMIT). An attempt
   * that fails is undone back to its savepoint and recorded outside, as alone; one whose completion
   * is fenced out is undone with every attempt after it, and those run again (released, nothing
   * counted). Resolves once the transaction is over, with the writes of every outcome in the tail.
   */
  async #runGroup(
    first: Execution,
    started: number,
    completion: TransactionalCompletion,
    savepoints: AttemptSavepoints,
    client: ExecutorTransactions,
  ): Promise<PoolJobTail> {
    const members: GroupMember[] = [];
    const opened = performance.now();
    let committing = false;
    let atCommit = false;
    try {
      await client.transaction(async (tx) => {
        let next: Execution | null = first;
        let nextStarted = started;
        while (next !== null) {
          const member = await this.#runMember(tx, next, nextStarted, members, savepoints, client);
          next = this.#joining(first, opened, members.length);
          if (next !== null) {
            nextStarted = performance.now();
            this.#begin(next, null);
          } else if (members.length === 1 && member.completed !== null) {
            // Alone after all: its SUCCESS goes out with the COMMIT where the store can, as alone.
            atCommit =
              completion.claimLost !== undefined &&
              completion.completeAtCommit?.(tx, member.completed) === true;
          }
        }
        if (!atCommit) await this.#completeMembers(tx, members, savepoints);
        committing = true;
      });
    } catch (error) {
      if (members.length === 0) {
        // The transaction could not be opened (no connection, BEGIN refused): the first attempt
        // never ran, and ends as that failure (put back uncounted where the store says it was lost).
        const never = groupMember(first, started, null);
        this.#memberOver(never);
        members.push(never);
      }
      this.#groupFailed(members, error, committing, atCommit, completion);
    }
    for (const member of members) member.end ??= { kind: 'committed' };
    return {
      recorded: Promise.all(members.map((m) => this.#recordMemberEnd(m))).then(() => undefined),
      // Each attempt's own time: the next one starts that soon after it, however long the COMMIT.
      durations: members.map((m) => m.durationMs),
      upTo: this.deps.transactionGroupSize ?? DEFAULT_TRANSACTION_GROUP,
      withinMs: this.deps.transactionGroupMs ?? GROUP_MS,
    };
  }

  /**
   * Runs one attempt of a shared transaction, in a savepoint unless it is the first. One that
   * fails is undone back to its savepoint (the first: with the whole transaction) and its failure
   * recorded later, outside it.
   */
  async #runMember(
    tx: unknown,
    execution: Execution,
    started: number,
    members: GroupMember[],
    savepoints: AttemptSavepoints,
    client: ExecutorTransactions,
  ): Promise<GroupMember> {
    const savepoint = members.length === 0 ? null : `asynccmd_attempt_${members.length}`;
    const member = groupMember(execution, started, savepoint);
    members.push(member);
    if (savepoint !== null) await savepoints.open(tx, savepoint);
    const scope = new AttemptTransaction(tx, client, execution.command.id);
    member.scope = scope;
    let failure = await this.#attemptIn(execution, scope);
    // It caught a failed statement and returned: the transaction refuses everything after it.
    if (failure === null && savepoints.failed !== undefined && (await savepoints.failed(tx))) {
      failure = { error: new TransactionRolledBackError(CAUGHT_STATEMENT_FAILURE) };
    }
    if (failure === null) {
      if (this.#progress.holds(execution)) await this.#progress.settle(execution, false);
      const { ref, resultJson } = execution;
      member.completed = resultJson === undefined ? ref : { ...ref, resultJson };
    }
    this.#memberOver(member);
    if (failure !== null) {
      member.end = { kind: 'failed', error: failure.error };
      if (savepoint === null) throw ROLL_BACK;
      await savepoints.rollbackTo(tx, savepoint);
    }
    return member;
  }

  /**
   * The SUCCESS of every attempt of the transaction that returned, in one go. One fenced out (its
   * claim taken away) is undone back to its savepoint, with every attempt after it (they run
   * again) and the completions just written; those before it are completed again.
   */
  async #completeMembers(
    tx: unknown,
    members: readonly GroupMember[],
    savepoints: AttemptSavepoints,
  ): Promise<void> {
    let waiting = members.filter((m) => m.end === null && m.completed !== null);
    while (waiting.length > 0) {
      const done = new Set(
        await savepoints.completeAll(
          tx,
          waiting.map((m) => m.completed!),
        ),
      );
      const k = waiting.findIndex((m) => !done.has(m.execution.command.id));
      if (k < 0) return;
      const fenced = waiting[k]!;
      fenced.end = { kind: 'fenced' };
      if (fenced.savepoint === null) throw ROLL_BACK;
      await savepoints.rollbackTo(tx, fenced.savepoint);
      for (const later of waiting.slice(k + 1)) later.end = { kind: 'displaced' };
      waiting = waiting.slice(0, k);
    }
  }

  /** A waiting transactional command that may join the transaction opened at `opened` now, or null. */
  #joining(first: Execution, opened: number, members: number): Execution | null {
    const most = this.deps.transactionGroupSize ?? DEFAULT_TRANSACTION_GROUP;
    if (members >= most || performance.now() - opened > (this.deps.transactionGroupMs ?? GROUP_MS))
      return null;
    return this.deps.nextTransactional?.(first) ?? null;
  }

  /** An attempt of a shared transaction has run: its timeout stops, its slot is the transaction's. */
  #memberOver(member: GroupMember): void {
    const { execution } = member;
    finishing(execution);
    member.durationMs = performance.now() - member.started;
  }

  /** How each attempt of a shared transaction that did not commit ends. */
  #groupFailed(
    members: readonly GroupMember[],
    error: unknown,
    committing: boolean,
    atCommit: boolean,
    completion: TransactionalCompletion,
  ): void {
    const undecided = members.filter((m) => m.end === null);
    if (error === ROLL_BACK) {
      // Undone on purpose (the first attempt failed or was fenced out): the others run again.
      for (const m of undecided) m.end = { kind: 'displaced' };
    } else if (committing && atCommit && completion.claimLost?.(error) === true) {
      // The one attempt's SUCCESS, sent with the COMMIT, found its claim taken away.
      for (const m of undecided) m.end = { kind: 'fenced' };
    } else if (committing) {
      // The COMMIT's answer was lost: each attempt's row says whether it landed.
      for (const m of undecided) m.end = { kind: 'uncertain', error, attempt: m.scope! };
    } else {
      // A statement before the COMMIT failed: nothing committed. A lost connection or a deadlock
      // puts each back uncounted (its transient loss); any other error counts against each.
      for (const m of undecided) m.end = { kind: 'failed', error };
    }
  }

  /** Records how an attempt of a shared transaction ended. Never rejects. */
  #recordMemberEnd(member: GroupMember): Promise<void> {
    const { execution, end, durationMs } = member;
    if (end?.kind === 'displaced') return this.#releaseDisplaced(execution);
    // A transaction lost through no fault of its own is one loss, however many attempts it held.
    const countsLoss = member.savepoint === null;
    return this.#recordTransactionEnd(execution, end ?? { kind: 'committed' }, durationMs, countsLoss);
  }

  /** An attempt undone with another that shared its transaction: back to PENDING, nothing counted. */
  async #releaseDisplaced(execution: Execution): Promise<void> {
    if (this.#progress.holds(execution)) await this.#progress.settle(execution);
    return this.#releaseUncounted(execution);
  }

  /** Puts a transactional attempt that did not commit back to PENDING, nothing counted. Never rejects. */
  async #releaseUncounted(execution: Execution): Promise<void> {
    try {
      const released = await this.deps.store.release([execution.ref]);
      this.deps.outage.succeeded('release');
      if (released.includes(execution.command.id)) {
        this.deps.events.emit({ kind: 'released', id: execution.command.id, type: execution.command.type });
        this.deps.onClaimable('released');
      } else this.#notRecorded(execution, false, 'failed');
    } catch (releaseError) {
      // The lease will run out and the hung reclaimer take it back.
      this.deps.outage.failed('release', releaseError);
    } finally {
      this.#forget(execution);
    }
  }

  /**
   * Runs the executor with `scope` as its transaction, then closes it: its failure, or null when it
   * returned and was not given up on meanwhile.
   */
  async #attemptIn(execution: Execution, scope: AttemptTransaction): Promise<{ error: unknown } | null> {
    let failure: { error: unknown } | null;
    try {
      // Aborted while the transaction was being opened (SQLite: waiting for the write lock).
      failure =
        execution.abortCause !== null
          ? { error: execution.signal.reason }
          : await this.#untilSettled(execution, scope);
    } finally {
      scope.close();
    }
    if (failure === null && execution.abortCause !== null) failure = { error: execution.signal.reason };
    return failure;
  }

  /** Runs the executor in its transaction; resolves with its failure (null: it returned) or once it was given up on. */
  #untilSettled(execution: Execution, scope: AttemptTransaction): Promise<{ error: unknown } | null> {
    const context = new TransactionalAttemptContext(execution, this.#contextSettings, scope);
    let ran: unknown;
    try {
      ran = this.#invoke(execution, context);
    } catch (error) {
      return Promise.resolve({ error });
    }
    if (!isThenable(ran)) return Promise.resolve(null);
    const running = ran instanceof Promise ? (ran as Promise<unknown>) : Promise.resolve(ran);
    execution.ran = running;
    return new Promise((resolve) => {
      if (execution.abortCause !== null) return resolve({ error: execution.signal.reason });
      // Given up on (timeout, lost claim, shutdown): the transaction is rolled back at once; the
      // executor's handle is closed, so whatever it still tries to write there is refused.
      execution.onAbort = (reason) => resolve({ error: reason });
      running.then(
        () => resolve(null),
        (error: unknown) => resolve({ error }),
      );
    });
  }

  /** Reports how a transactional attempt ended, writing its failure when it failed. Never rejects. */
  async #recordTransactionEnd(
    execution: Execution,
    end: TransactionEnd,
    durationMs: number,
    countsLoss = true,
  ): Promise<void> {
    if (this.#progress.holds(execution)) await this.#progress.settle(execution);
    if (end.kind === 'failed') return this.#recordRolledBack(execution, end.error, durationMs, countsLoss);
    try {
      if (end.kind === 'uncertain') {
        // The answer to the COMMIT was lost: the row says whether it landed, before anything is
        // retried (a retry written over a committed attempt would be fenced out anyway).
        const ref = execution.ref;
        const committed = await this.#settleCommit(ref);
        if (committed === null) return this.#notRecorded(execution, ABANDONED, 'succeeded');
        if (!committed) return await this.#recordRolledBack(execution, end.error, durationMs, countsLoss);
        // Committed: what it submitted was never dispatched.
        await this.deps.transactions?.().afterCommit(end.attempt.dispatched);
      }
      this.#transientLosses = 0;
      if (end.kind === 'fenced') this.#notRecorded(execution, false, 'succeeded');
      else this.#succeeded(execution, durationMs);
    } catch (error) {
      this.#recordingFailed(execution, error);
    } finally {
      this.#forget(execution);
    }
  }

  /**
   * A transactional attempt rolled back. Lost through no fault of its own (the store says so: a
   * connection that died, a deadlock victim) and not given up on, it goes back to PENDING at once,
   * nothing counted against it, as at shutdown; otherwise its failure is recorded as any other.
   * `countsLoss`: false for the later attempts of a shared transaction (its first counts the loss).
   */
  async #recordRolledBack(
    execution: Execution,
    error: unknown,
    durationMs: number,
    countsLoss = true,
  ): Promise<void> {
    const transient =
      execution.abortCause === null && (this.deps.store.transactionalCompletion?.isTransient(error) ?? false);
    if (!transient) return this.#recordFailure(execution, { error }, durationMs);
    // One loss (a deadlock victim, a connection that died) runs again at once; losses in a row
    // with no commit between are an outage of the transactions' connections (an ORM's pool that
    // cannot connect): hold the claim a growing while first, or released commands would be
    // claimed and lost again as fast as the store answers.
    if (countsLoss) this.#transientLosses += 1;
    if (countsLoss && this.#transientLosses > 1) {
      await pause(outageDelayMs(this.#transientLosses - 1), this.#givenUp.signal);
    }
    return this.#releaseUncounted(execution);
  }

  /** Whether the attempt's transaction committed, asked until the store answers; null once shutdown gives up. */
  async #settleCommit(ref: { id: string; token: string }): Promise<boolean | null> {
    const completion = this.deps.store.transactionalCompletion;
    if (completion === undefined) return false;
    for (;;) {
      try {
        const committed = await completion.succeededUnder(ref);
        this.deps.outage.succeeded('succeededUnder');
        return committed;
      } catch (error) {
        const failures = this.deps.outage.failed('succeededUnder', error);
        if (this.#givenUp.signal.aborted) return null;
        await pause(outageDelayMs(failures), this.#givenUp.signal);
      }
    }
  }

  async #recordFailure(execution: Execution, failure: { error: unknown }, durationMs: number): Promise<void> {
    const { command, entry } = execution;
    const { events, logger } = this.deps;
    try {
      if (execution.abortCause === 'shutdown') {
        // Stopped by shutdown, not by its own fault: back to PENDING with nothing counted against
        // it, and the attempt in its history (it ran, and may have had effects).
        const done = await this.deps.outcomes.fail(
          execution.ref,
          decideShutdownAbort(command, execution.signal.reason),
        );
        if (done === true) events.emit({ kind: 'released', id: command.id, type: command.type });
        else this.#notRecorded(execution, done, 'failed');
      } else {
        const decided = decideFailure(command, failure.error, this.deps.clock.now(), entry.backoff);
        const outcome = { ...decided, lastError: this.#errorText(failure.error) };
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

  /** A failure's text as stored: redacted (whole, before it is cut to length), never a throw. */
  #errorText(error: unknown): string {
    const text = describeFailure(error);
    let redacted: unknown;
    try {
      redacted = this.deps.redactError(text);
    } catch (err) {
      this.deps.logger.warn({ err }, 'asynccmd: redactError threw; the default redaction is used');
    }
    return truncateErrorText(typeof redacted === 'string' ? redacted : redactErrorText(text));
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
  #invoke(execution: Execution, attemptContext: ExecutionContext): unknown {
    const { command, entry } = execution;
    // A transactional executor gets its TransactionalContext (see #runInTransaction).
    const context = attemptContext as TransactionalContext<never, never>;
    const execute = (): unknown => entry.executor.execute(command.payload as never, context);
    if (this.#interceptors.length === 0) return execute();
    let next = async (): Promise<void> => {
      await execute();
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
    this.#progress.forget(execution);
    this.deps.leases.release(execution);
    this.#inflight.delete(execution);
    if (this.#inflight.size === 0 && this.#idle.length > 0) {
      const idle = this.#idle;
      this.#idle = [];
      for (const resolve of idle) resolve();
    }
  }

  /** Stops asking the store whether lost COMMITs landed (shutdown gave up on outcome writes). */
  giveUp(): void {
    this.#givenUp.abort();
  }

  /** Aborts running executions (shutdown deadline passed). */
  abortRunning(): void {
    for (const e of this.#inflight) {
      if (e.state === 'running')
        e.abort('shutdown', namedError('ShutdownError', 'the instance is shutting down'));
    }
  }
}

/** What an attempt's context needs of its runner. */
interface ContextSettings extends Pick<CommandRunnerDeps, 'logger' | 'maxResultBytes' | 'store'> {
  readonly progress: ProgressWriter;
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
  readonly #settings: ContextSettings;

  constructor(execution: Execution, settings: ContextSettings) {
    const { command } = execution;
    this.id = command.id;
    this.command = command;
    this.attempt = command.retryCount + 1;
    this.tick = tickOf(command.headers);
    this.logger = settings.logger;
    this.#execution = execution;
    this.#settings = settings;
    Object.defineProperty(this, 'signal', SIGNAL);
  }

  setResult(result: unknown): void {
    const json = serialiseResult(result, this.#settings.maxResultBytes);
    if (E.isLeft(json)) throw json.left;
    // Once the attempt is over (given up on by a timeout, say), nothing it leaves is kept.
    if (this.#execution.state === 'running') this.#execution.resultJson = json.right;
  }

  async dependencies(): Promise<readonly DependencyOutcome[]> {
    return (await this.#settings.store.dependencies?.dependenciesOf(this.id)) ?? [];
  }

  progress(progress: CommandProgress): void {
    const checked = requireProgress(progress);
    // Once the attempt is over, nothing it reports is kept (as with setResult).
    if (this.#execution.state === 'running') this.#settings.progress.report(this.#execution, checked);
  }

  static signalOf(context: AttemptContext): AbortSignal {
    return context.#execution.signal;
  }
}

/** The context of a transactional attempt: an AttemptContext with the transaction and submits in it. */
class TransactionalAttemptContext extends AttemptContext implements TransactionalContext {
  declare readonly tx: unknown;
  readonly #scope: AttemptTransaction;

  constructor(execution: Execution, settings: ContextSettings, scope: AttemptTransaction) {
    super(execution, settings);
    this.#scope = scope;
    // An own getter, as `signal`: a spread copy reads it (and, once the attempt is over, is refused).
    Object.defineProperty(this, 'tx', { get: () => scope.handle(), enumerable: true });
  }

  submit(type: string, payload: unknown, options?: DependentSubmitOptions): Promise<string> {
    return this.#scope.submit(type, payload, options);
  }

  submitMany(items: readonly SubmitItem<CommandTypeMap>[]): Promise<string[]> {
    return this.#scope.submitMany(items);
  }

  submitIdempotent(
    type: string,
    bizKey: string,
    payload: unknown,
    options?: IdempotentSubmitOptions,
  ): ReturnType<TransactionalContext['submitIdempotent']> {
    return this.#scope.submitIdempotent(type, bizKey, payload, options);
  }

  workflow(id?: string): AttemptWorkflow {
    return this.#scope.workflow(id);
  }
}

const SIGNAL: PropertyDescriptor = {
  get(this: AttemptContext) {
    return AttemptContext.signalOf(this);
  },
  enumerable: true,
};

const NOTHING: Promise<void> = Promise.resolve();

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}
