import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import {
  redactErrorText,
  DEFAULT_MAX_RESCUES,
  exponentialBackoff,
  InvalidArgumentError,
  optionalInstance,
  silentLogger,
  systemClock,
  type Clock,
  type CommandEventListener,
  type CommandStore,
  type Logger,
  type TokenSource,
  LIMITS,
} from '@asynccmd/core';
import type { ExecutorTransactions } from './attempt-transaction.js';
import { AsyncCommandClient } from './client.js';
import { CommandEvents } from './command-events.js';
import { CommandRunner } from './command-runner.js';
import { Execution } from './execution.js';
import { Dispatcher } from './dispatcher.js';
import type { CommandTypeMap } from './executor.js';
import { ExecutorRegistry } from './executor-registry.js';
import { ImmediateDispatch } from './immediate-dispatch.js';
import {
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_RETRY,
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_RECLAIM_BATCH_SIZE,
  DEFAULT_SHARED_POOL,
  DEFAULT_SHUTDOWN_TIMEOUT_MS,
  type AsyncCommandsOptions,
  type StopOptions,
} from './options.js';
import { heartbeatPeriod, validateOptions } from './options-validation.js';
import { OutcomeWriter } from './outcome-writer.js';
import { PoolSet } from './pool-set.js';
import { Scheduler, type SchedulerState } from './scheduler.js';
import { HungReclaimer } from './services/hung-reclaimer.js';
import { LeaseKeeper } from './services/lease-keeper.js';
import { Maintainer } from './services/maintainer.js';
import { CleanupWatch } from './services/cleanup-watch.js';
import { Retention } from './services/retention.js';
import { RecurringSchedules } from './recurring/recurring-control.js';
import { RecurringService } from './recurring/recurring-service.js';
import { pause, StoreOutage } from './store-outage.js';
import { toNewCommand } from './submit-validation.js';
import { DeclaredTypeLimits } from './type-limits.js';
import { declaredKeyLimits, DeclaredKeyLimits, DeclaredKeyRateLimits } from './key-limits.js';
import { DeclaredRateLimits } from './rate-limits.js';
import { PausedTypes, TypePauses } from './type-pauses.js';

export type RuntimeStatus = 'idle' | 'running' | 'stopping' | 'stopped';

export interface RuntimeState {
  readonly status: RuntimeStatus;
  readonly scheduler: SchedulerState;
  /** Claims whose leases this instance keeps alive. */
  readonly heldLeases: number;
  /** Store operations failing right now (empty when the database is reachable). */
  readonly failingStoreOperations: readonly string[];
}

/** crypto.randomUUID: a fresh, unguessable token per claim, so a stale holder's writes match nothing. */
export const uuidTokenSource: TokenSource = { next: () => randomUUID() };

/** A name for this runtime's claims: host and process for people, and random so no two runtimes share one. */
export function defaultInstanceId(): string {
  return `${hostname().slice(0, 80)}/${process.pid}/${randomUUID().slice(0, 8)}`;
}

/**
 * One asynccmd instance: the client to submit with, and the scheduler, pools and background
 * services (lease keeper, hung reclaimer, retention when asked for) that run this process's
 * executors and keep the table. `start()` to run, `stop()` to shut down gracefully.
 */
export class AsyncCommands<TM extends CommandTypeMap = CommandTypeMap, Tx = unknown> {
  readonly store: CommandStore<Tx>;
  readonly registry: ExecutorRegistry;
  readonly events: CommandEvents;
  readonly client: AsyncCommandClient<TM, Tx>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** How this instance names itself in its claims (claimedBy, the attempt history). */
  readonly instanceId: string;
  /** The recurring schedules in the table: list, pause, resume (shared by all instances). */
  readonly schedules: RecurringSchedules;
  /** Command types paused for every instance: pause, resume, list (see TypePauses). */
  readonly typePauses: TypePauses;
  // The runtime's machinery, its own: what users may ask of it are the methods below (runRound,
  // wake, hearingRevocations) and state().
  readonly #scheduler: Scheduler;
  readonly #pools: PoolSet;
  readonly #leases: LeaseKeeper;
  readonly #runner: CommandRunner;
  readonly #outcomes: OutcomeWriter;
  readonly #outage: StoreOutage;
  readonly #maintainer: Maintainer;
  #status: RuntimeStatus = 'idle';
  #stopped: Promise<void> | null = null;

  constructor(options: AsyncCommandsOptions<Tx>) {
    validateOptions(options);
    const store = options.store as CommandStore;
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? silentLogger;
    const tokens = options.tokens ?? uuidTokenSource;
    this.instanceId = optionalInstance(options.instanceId) ?? defaultInstanceId();
    this.events = new CommandEvents(this.logger);
    this.#outage = new StoreOutage(this.events, this.logger);
    const pools = options.pools ?? {};
    this.registry = new ExecutorRegistry(options.executors ?? [], {
      leaseMs: options.leaseMs ?? DEFAULT_LEASE_MS,
      backoff: options.backoff ?? exponentialBackoff(),
      pools: Object.keys(pools),
    });
    this.#pools = new PoolSet(options.sharedPool ?? DEFAULT_SHARED_POOL, pools, (pool) =>
      this.#scheduler.capacityFreed(pool),
    );
    const shortestLease = Math.min(
      options.leaseMs ?? DEFAULT_LEASE_MS,
      ...this.registry.entries().map((e) => e.leaseMs),
    );
    const heartbeatMs = heartbeatPeriod(options.heartbeatIntervalMs, shortestLease);
    this.#leases = new LeaseKeeper(store, this.#outage, heartbeatMs);
    this.#outcomes = new OutcomeWriter(store, this.#outage);
    const pausedTypes = new PausedTypes(store, this.#outage, () => this.#scheduler.wake());
    const shared = {
      store,
      typeLimits: new DeclaredTypeLimits(store, options.typeLimits ?? {}),
      rateLimits: new DeclaredRateLimits(store, options.rateLimits ?? {}),
      keyLimits: new DeclaredKeyLimits(store, declaredKeyLimits(options.keyLimits, options.fairShare)),
      keyRateLimits: new DeclaredKeyRateLimits(store, options.keyRateLimits ?? {}),
      pausedTypes,
      registry: this.registry,
      events: this.events,
      clock: this.clock,
      outage: this.#outage,
      instance: this.instanceId,
    };
    const transactional = this.registry.entries().filter((e) => e.transactional);
    if (transactional.length > 0 && store.transactionalCompletion === undefined) {
      throw new InvalidArgumentError(
        `executor "${transactional[0]!.type}" is transactional, which needs a store that completes in transactions; the ${store.dialect} store does not`,
      );
    }
    const throughOrm = transactional.find((e) => e.opener !== null);
    if (throughOrm !== undefined && store.transactionalCompletion?.throughSqlExecutor !== true) {
      throw new InvalidArgumentError(
        `executor "${throughOrm.type}" runs in an ORM's transaction, in which the ${store.dialect} store cannot complete; declare \`transactional: true\` and use the store's handle`,
      );
    }
    this.#runner = new CommandRunner({
      ...shared,
      transactions: () => this.client as unknown as ExecutorTransactions,
      ...(options.transactionGroupSize === undefined
        ? {}
        : { transactionGroupSize: options.transactionGroupSize }),
      ...(options.transactionGroupMs === undefined ? {} : { transactionGroupMs: options.transactionGroupMs }),
      nextTransactional: (after) => {
        if (after.poolName === null) return null;
        const now = performance.now();
        return this.#pools
          .get(after.poolName)
          .take(
            (job): job is Execution =>
              job instanceof Execution &&
              job.state === 'claimed' &&
              job.entry.transactional &&
              job.entry.opener === null &&
              !this.#leases.mayLapse(job, now),
          );
      },
      logger: this.logger,
      interceptors: options.interceptors ?? [],
      leases: this.#leases,
      outcomes: this.#outcomes,
      maxResultBytes: options.maxResultBytes ?? LIMITS.defaultResultBytes,
      redactError: options.redactError ?? redactErrorText,
      onClaimable: (by) => {
        if (by === 'succeeded') return this.#scheduler.freed();
        store.wakeups?.notify();
        this.#scheduler.wake();
      },
    });
    const dispatcher = new Dispatcher(this.#pools);
    const pollIntervalMs = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    this.#scheduler = new Scheduler(
      { ...shared, pools: this.#pools, runner: this.#runner, dispatcher, tokens },
      {
        pollIntervalMs,
        scheduledBatchSize: options.scheduledBatchSize,
        scheduledTypeTurns: options.scheduledTypeTurns ?? false,
      },
    );
    const reclaimer = new HungReclaimer(
      store,
      this.events,
      this.#outage,
      {
        intervalMs: options.reclaimIntervalMs ?? pollIntervalMs,
        batchSize: options.reclaimBatchSize ?? DEFAULT_RECLAIM_BATCH_SIZE,
        maxRescues: options.maxRescues ?? DEFAULT_MAX_RESCUES,
      },
      (reclaimed, due) => this.#scheduler.reclaimed(reclaimed, due),
    );
    const retention = options.retention
      ? new Retention(store, this.#outage, this.logger, options.retention)
      : null;
    const recurring = this.#recurringService(options, store);
    this.schedules = new RecurringSchedules(store, this.clock, {
      knownTypes: () => [...this.registry.types(), ...(options.submitOnlyTypes ?? [])],
      maxPayloadBytes: options.maxPayloadBytes ?? LIMITS.defaultPayloadBytes,
      changed: () => recurring?.refreshSoon(),
    });
    this.typePauses = new TypePauses(store, {
      changed: (type, paused) => pausedTypes.changed(type, paused),
      // The others claim it again once their next read finds it resumed.
      resumed: () => this.#scheduler.wake(),
      knownTypes: () => [...this.registry.types(), ...(options.submitOnlyTypes ?? [])],
    });
    // Only an instance that claims reads the paused types, and watches the database's cleanup.
    const claims = this.registry.types().length > 0;
    const reader = claims ? pausedTypes : null;
    const watch =
      claims && options.cleanupWatch !== false && store.cleanupHorizon !== undefined
        ? new CleanupWatch(store.cleanupHorizon, this.#outage, this.logger, options.cleanupWatch ?? {})
        : null;
    this.#maintainer = new Maintainer(this.#leases, [reader, reclaimer, retention, recurring, watch]);
    const immediate = new ImmediateDispatch({
      ...shared,
      runner: this.#runner,
      dispatcher,
      tokens,
      accepting: () => this.#status === 'running',
    });
    const headersProvider = options.headersProvider;
    this.client = new AsyncCommandClient<TM, Tx>({
      store: options.store,
      registry: this.registry,
      events: this.events,
      ...(options.submitWindows === undefined ? {} : { windows: options.submitWindows }),
      rules: {
        registry: this.registry,
        submitOnlyTypes: options.submitOnlyTypes ?? [],
        maxPayloadBytes: options.maxPayloadBytes ?? LIMITS.defaultPayloadBytes,
        defaultMaxRetry: options.defaultMaxRetry ?? DEFAULT_MAX_RETRY,
        typePriorities: options.typePriorities ?? {},
        owner: options.owner ?? null,
        headers: headersProvider ? () => headersProvider() : () => ({}),
        clock: this.clock,
      },
      claimOnCommit: (tx, immediateIds) => immediate.claimOnCommit(tx, immediateIds),
      afterCommit: async ({ immediateIds, others, announced, claimedOnCommit, immediateTypes }) => {
        const wake = (elsewhere: boolean): void => {
          if (elsewhere) store.wakeups?.notify();
          this.#scheduler.wake();
        };
        if (others > 0) wake(!announced);
        const missed = await immediate.dispatch(immediateIds, claimedOnCommit, immediateTypes);
        if (missed > 0 && others === 0) wake(true);
      },
    });
  }

  /** The service that enqueues the ticks of `recurring`, or null when there are none. */
  #recurringService(options: AsyncCommandsOptions<Tx>, store: CommandStore): RecurringService | null {
    const schedules = options.recurring ?? [];
    // Without schedules in code the service still runs where the store keeps schedules: it picks up
    // those added at run time (runtime.schedules.add, the CLI, the admin API) for its executors' types.
    if (schedules.length === 0 && (store.schedules === undefined || this.registry.types().length === 0)) {
      return null;
    }
    if (store.schedules === undefined) {
      throw new InvalidArgumentError(
        `asynccmd option \`recurring\` needs a store that keeps schedules; the ${store.dialect} store does not`,
      );
    }
    const submitOnly = options.submitOnlyTypes ?? [];
    const rules = {
      registry: this.registry,
      submitOnlyTypes: submitOnly,
      maxPayloadBytes: options.maxPayloadBytes ?? LIMITS.defaultPayloadBytes,
      defaultMaxRetry: options.defaultMaxRetry ?? DEFAULT_MAX_RETRY,
      typePriorities: options.typePriorities ?? {},
      owner: options.owner ?? null,
      headers: () => ({}),
      clock: this.clock,
    };
    // A tick's command is checked as a submit is, here once for what is known now (the type, a fixed
    // payload), so a mistake fails the start rather than every tick.
    for (const s of schedules) {
      try {
        toNewCommand(rules, s.type, s.payloadFor ? null : (s.payload ?? null), {
          ...(s.maxRetry !== undefined ? { maxRetry: s.maxRetry } : {}),
        });
      } catch (e) {
        if (e instanceof Error) e.message = `recurring schedule "${s.name}": ${e.message}`;
        throw e;
      }
    }
    return new RecurringService(
      {
        schedules: store.schedules,
        clock: this.clock,
        logger: this.logger,
        events: this.events,
        outage: this.#outage,
        rules,
        enqueued: () => {
          store.wakeups?.notify();
          this.#scheduler.wake();
        },
        runs: (type) => this.registry.has(type),
      },
      schedules,
    );
  }

  /** Subscribes to every CommandEvent; returns the unsubscribe function. */
  on(listener: CommandEventListener): () => void {
    return this.events.on(listener);
  }

  /** Starts the poll loop and the background services. */
  start(): void {
    if (this.#status !== 'idle')
      throw new InvalidArgumentError(`cannot start: the runtime is ${this.#status}`);
    this.#status = 'running';
    // The services first: the first claim round waits for the first read of the paused types.
    this.#maintainer.start();
    this.#scheduler.start();
  }

  /**
   * Graceful shutdown: stop claiming and the table's upkeep, release claimed-but-unstarted
   * commands, wait for running ones up to `timeoutMs` (then abort their signals), stop heartbeats,
   * close the store.
   */
  stop(options: StopOptions = {}): Promise<void> {
    this.#stopped ??= this.#shutdown(options);
    return this.#stopped;
  }

  /**
   * Runs one round now, as the poll loop does (reclaim, claim what the pools have room for,
   * dispatch): for a test or a script that drives the runtime itself.
   */
  async runRound(): Promise<void> {
    await this.#scheduler.runRound();
  }

  /** Asks for a round as soon as possible, as a local submit or a store's wake-up does. */
  wake(): void {
    this.#scheduler.wake();
  }

  /**
   * Whether this instance hears revocations (a requeue or a kill of a command it runs reaches it
   * at once, `store.capabilities.revocations`); settles once it has subscribed, or knows it cannot.
   */
  hearingRevocations(): Promise<boolean> {
    return this.#leases.hearingRevocations;
  }

  state(): RuntimeState {
    return {
      status: this.#status,
      scheduler: this.#scheduler.state(),
      heldLeases: this.#leases.size,
      failingStoreOperations: this.#outage.failing(),
    };
  }

  async #shutdown({
    timeoutMs = DEFAULT_SHUTDOWN_TIMEOUT_MS,
    closeStore = true,
  }: StopOptions): Promise<void> {
    const wasRunning = this.#status === 'running';
    this.#status = 'stopping';
    // Every wait below ends when shutdown is over, whoever won its race: a timer left running
    // would hold the process open for up to `timeoutMs` after stop() resolved.
    const over = new AbortController();
    const deadline = pause(timeoutMs, over.signal);
    try {
      if (wasRunning) {
        const loopDone = Promise.all([this.#scheduler.stop(), this.#maintainer.stopUpkeep()]);
        for (const pool of this.#pools.all()) pool.drainQueue();
        await this.#releaseUnstarted();
        await Promise.race([loopDone, deadline]);
        await this.#releaseUnstarted();
        await Promise.race([this.#runner.whenIdle(), deadline]);
        if (this.#runner.inflight().length > 0) {
          this.logger.warn(
            { running: this.#runner.inflight().length, timeoutMs },
            'asynccmd: shutdown timeout passed; aborting running commands',
          );
          this.#runner.abortRunning();
          this.#outcomes.giveUp();
          this.#runner.giveUp();
          await Promise.race([this.#runner.whenIdle(), pause(1_000, over.signal)]);
        }
        await loopDone;
      }
      await this.#maintainer.stop();
      if (closeStore) await this.store.close();
    } finally {
      over.abort();
      this.#status = 'stopped';
    }
  }

  #releaseUnstarted(): Promise<void> {
    return this.#runner.release(this.#runner.inflight().filter((e) => e.state === 'claimed'));
  }
}
