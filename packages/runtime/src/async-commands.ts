import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import {
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFAULT_MAX_RESULT_BYTES,
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
} from '@asynccmd/core';
import { AsyncCommandClient } from './client.js';
import { CommandEvents } from './command-events.js';
import { CommandRunner } from './command-runner.js';
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
import { Retention } from './services/retention.js';
import { RecurringSchedules } from './recurring/recurring-control.js';
import { RecurringService } from './recurring/recurring-service.js';
import { pause, StoreOutage } from './store-outage.js';
import { toNewCommand } from './submit-validation.js';
import { DeclaredTypeLimits } from './type-limits.js';
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

/** crypto.randomUUID: a fresh token per claim (seed §3). */
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
  readonly scheduler: Scheduler;
  readonly pools: PoolSet;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly leases: LeaseKeeper;
  /** How this instance names itself in its claims (claimedBy, the attempt history). */
  readonly instanceId: string;
  /** The recurring schedules in the table: list, pause, resume (shared by all instances). */
  readonly schedules: RecurringSchedules;
  /** Command types paused for every instance: pause, resume, list (see TypePauses). */
  readonly typePauses: TypePauses;
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
    this.pools = new PoolSet(options.sharedPool ?? DEFAULT_SHARED_POOL, pools, (pool) =>
      this.scheduler.capacityFreed(pool),
    );
    const shortestLease = Math.min(
      options.leaseMs ?? DEFAULT_LEASE_MS,
      ...this.registry.entries().map((e) => e.leaseMs),
    );
    const heartbeatMs = heartbeatPeriod(options.heartbeatIntervalMs, shortestLease);
    this.leases = new LeaseKeeper(store, this.#outage, heartbeatMs);
    this.#outcomes = new OutcomeWriter(store, this.#outage);
    const pausedTypes = new PausedTypes(store, this.#outage, () => this.scheduler.wake());
    const shared = {
      store,
      typeLimits: new DeclaredTypeLimits(store, options.typeLimits ?? {}),
      pausedTypes,
      registry: this.registry,
      events: this.events,
      clock: this.clock,
      outage: this.#outage,
      instance: this.instanceId,
    };
    this.#runner = new CommandRunner({
      ...shared,
      logger: this.logger,
      interceptors: options.interceptors ?? [],
      leases: this.leases,
      outcomes: this.#outcomes,
      maxResultBytes: options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES,
      onClaimable: (by) => {
        if (by === 'succeeded') return this.scheduler.freed();
        store.wakeups?.notify();
        this.scheduler.wake();
      },
    });
    const dispatcher = new Dispatcher(this.pools);
    const pollIntervalMs = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    this.scheduler = new Scheduler(
      { ...shared, pools: this.pools, runner: this.#runner, dispatcher, tokens },
      {
        pollIntervalMs,
        scheduledBatchSize: options.scheduledBatchSize,
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
      (reclaimed, due) => this.scheduler.reclaimed(reclaimed, due),
    );
    const retention = options.retention
      ? new Retention(store, this.#outage, this.logger, options.retention)
      : null;
    const recurring = this.#recurringService(options, store);
    this.schedules = new RecurringSchedules(store, this.clock, {
      knownTypes: () => [...this.registry.types(), ...(options.submitOnlyTypes ?? [])],
      maxPayloadBytes: options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
      changed: () => recurring?.refreshSoon(),
    });
    this.typePauses = new TypePauses(store, {
      changed: (type, paused) => pausedTypes.changed(type, paused),
      // The others claim it again once their next read finds it resumed.
      resumed: () => this.scheduler.wake(),
    });
    // Only an instance that claims reads the paused types.
    const reader = this.registry.types().length > 0 ? pausedTypes : null;
    this.#maintainer = new Maintainer(this.leases, [reader, reclaimer, retention, recurring]);
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
      rules: {
        registry: this.registry,
        submitOnlyTypes: options.submitOnlyTypes ?? [],
        maxPayloadBytes: options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
        defaultMaxRetry: options.defaultMaxRetry ?? DEFAULT_MAX_RETRY,
        typePriorities: options.typePriorities ?? {},
        owner: options.owner ?? null,
        headers: headersProvider ? () => headersProvider() : () => ({}),
        clock: this.clock,
      },
      claimOnCommit: (tx, immediateIds) => immediate.claimOnCommit(tx, immediateIds),
      afterCommit: async ({ immediateIds, others, announced, claimedOnCommit }) => {
        const wake = (elsewhere: boolean): void => {
          if (elsewhere) store.wakeups?.notify();
          this.scheduler.wake();
        };
        if (others > 0) wake(!announced);
        const missed = await immediate.dispatch(immediateIds, claimedOnCommit);
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
      maxPayloadBytes: options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
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
          this.scheduler.wake();
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
    this.scheduler.start();
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

  state(): RuntimeState {
    return {
      status: this.#status,
      scheduler: this.scheduler.state(),
      heldLeases: this.leases.size,
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
        const loopDone = Promise.all([this.scheduler.stop(), this.#maintainer.stopUpkeep()]);
        for (const pool of this.pools.all()) pool.drainQueue();
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
