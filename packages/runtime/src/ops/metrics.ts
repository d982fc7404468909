import {
  COMMAND_STATUSES,
  LIMITS,
  systemClock,
  type ClaimedCommand,
  type Clock,
  type CommandEvent,
  type CommandEventListener,
  type CleanupHorizonProbe,
  type CommandStore,
} from '@asynccmd/core';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { readStats } from './stats-view.js';

export interface MetricsOptions {
  /** Where the series are registered. Default: a new registry, never prom-client's global one. */
  readonly registry?: Registry;
  /** When given, the gauges of commands by status and of the pending age are read from it at each scrape. */
  readonly store?: CommandStore;
  /** Metric name prefix. Default 'asynccmd_'. */
  readonly prefix?: string;
  /** Judges accept→terminal latency (createdAt → the event). Default: the system clock. */
  readonly clock?: Clock;
  /** Buckets in seconds of the execution-duration histogram. */
  readonly executionBuckets?: readonly number[];
  /** Buckets in seconds of the accept→terminal latency histogram. */
  readonly latencyBuckets?: readonly number[];
}

export interface CommandMetrics {
  readonly registry: Registry;
  /** Subscribe it to the runtime's command events. */
  readonly listener: CommandEventListener;
  /** The Content-Type to serve `metrics()` with. */
  readonly contentType: string;
  /** The Prometheus text exposition of the registry. */
  metrics(): Promise<string>;
}

const EXECUTION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
// From "ran right after commit" to "retried over a day": the latency an API client experiences.
const LATENCY_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600];
const ROUND_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/**
 * Prometheus series for asynccmd. Counters and histograms are fed by the `listener`; the gauges of
 * what the table holds are read from the store at scrape time (one stats query per scrape, shared by
 * every gauge), so they are true for the whole cluster, not just this instance.
 */
export function createMetrics(options: MetricsOptions = {}): CommandMetrics {
  const registry = options.registry ?? new Registry();
  const p = options.prefix ?? 'asynccmd_';
  const clock = options.clock ?? systemClock;
  const registers = [registry];
  if (options.store !== undefined) registerStoreGauges(options.store, p, registry);

  const counter = (name: string, help: string, labelNames: readonly string[] = ['type']) =>
    new Counter({ name: `${p}${name}`, help, labelNames, registers });
  const submitted = counter('commands_submitted_total', 'Commands submitted, by type and duplicate.', [
    'type',
    'duplicate',
  ]);
  const claimed = counter('commands_claimed_total', 'Commands claimed, by type and via (poll | immediate).', [
    'type',
    'via',
  ]);
  const succeeded = counter('commands_succeeded_total', 'Commands that succeeded.');
  const retried = counter('commands_retried_total', 'Failed attempts scheduled for a retry.');
  const dead = counter('commands_dead_total', 'Commands that became dead letters after a failed attempt.');
  const reclaimed = counter(
    'commands_reclaimed_total',
    'RUNNING commands taken back after their lease expired, by outcome (pending | dead).',
    ['type', 'outcome'],
  );
  const fenced = counter(
    'commands_fenced_total',
    'Outcomes not recorded because the claim had been taken away meanwhile.',
  );
  const released = counter('commands_released_total', 'Claimed commands handed back unstarted (shutdown).');
  const storeErrors = counter('store_errors_total', 'Store operations that failed, by operation.', [
    'operation',
  ]);
  const histogram = (name: string, help: string, buckets: readonly number[], labelNames: readonly string[]) =>
    new Histogram({ name: `${p}${name}`, help, labelNames, buckets: [...buckets], registers });
  const execution = histogram(
    'execution_duration_seconds',
    'Executor run time, by type and outcome (succeeded | retried | dead).',
    options.executionBuckets ?? EXECUTION_BUCKETS,
    ['type', 'outcome'],
  );
  const acceptToTerminal = histogram(
    'accept_to_terminal_seconds',
    'From submit (createdAt) to a terminal outcome (succeeded | dead): what an API client waits.',
    options.latencyBuckets ?? LATENCY_BUCKETS,
    ['type', 'outcome'],
  );
  const round = histogram(
    'claim_round_duration_seconds',
    'Duration of a scheduler round (reclaim + claim).',
    ROUND_BUCKETS,
    [],
  );

  const terminal = (command: ClaimedCommand, outcome: 'succeeded' | 'dead'): void => {
    const seconds = Math.max(0, clock.now().getTime() - command.createdAt.getTime()) / 1_000;
    acceptToTerminal.observe({ type: command.type, outcome }, seconds);
  };

  const executed = (
    count: Counter,
    command: ClaimedCommand,
    outcome: 'succeeded' | 'retried' | 'dead',
    durationMs: number,
  ): void => {
    count.inc({ type: command.type });
    execution.observe({ type: command.type, outcome }, durationMs / 1_000);
  };

  const listener = (event: CommandEvent): void => {
    switch (event.kind) {
      case 'submitted':
        submitted.inc({ type: event.type, duplicate: String(event.duplicate) });
        return;
      case 'claimed':
        claimed.inc({ type: event.command.type, via: event.via });
        return;
      case 'succeeded':
        executed(succeeded, event.command, 'succeeded', event.durationMs);
        terminal(event.command, 'succeeded');
        return;
      case 'retried':
        executed(retried, event.command, 'retried', event.durationMs);
        return;
      case 'dead':
        executed(dead, event.command, 'dead', event.durationMs);
        terminal(event.command, 'dead');
        return;
      case 'fenced':
        fenced.inc({ type: event.command.type });
        return;
      case 'reclaimed':
        reclaimed.inc({ type: event.type, outcome: event.dead ? 'dead' : 'pending' });
        return;
      case 'released':
        released.inc({ type: event.type });
        return;
      case 'round':
        round.observe(event.durationMs / 1_000);
        return;
      case 'store-error':
        storeErrors.inc({ operation: event.operation });
        return;
      case 'started':
        return;
    }
  };

  return {
    registry,
    listener,
    contentType: registry.contentType,
    metrics: () => registry.metrics(),
  };
}

/**
 * Gauges of what the table holds, read from the store at scrape time. prom-client collects all
 * metrics concurrently: the first gauge starts the stats query, the others join it.
 */
function registerStoreGauges(store: CommandStore, p: string, registry: Registry): void {
  const registers = [registry];
  let refreshing: Promise<void> | null = null;
  const refresh = (): Promise<void> => {
    refreshing ??= refreshFromStore().finally(() => {
      refreshing = null;
    });
    return refreshing;
  };
  const gauge = (name: string, help: string, labelNames: readonly string[] = []) =>
    new Gauge({ name: `${p}${name}`, help, labelNames, registers, collect: refresh });
  const commands = gauge(
    'commands',
    'Commands in the table by status and type (read from the store at scrape).',
    ['status', 'type'],
  );
  const deadLetters = gauge(
    'dead_letters',
    'DEAD commands waiting for a person (read from the store at scrape).',
  );
  const pendingAge = gauge(
    'oldest_pending_age_seconds',
    'How long the oldest due PENDING command has waited past its due time; 0 when none waits.',
  );
  const storeUp = gauge('store_up', '1 when the last scrape could read the store, else 0.');
  const typePaused = gauge(
    'type_paused',
    '1 while the type is paused for every instance (its PENDING commands wait), 0 once resumed.',
    ['type'],
  );

  const rateTokens = gauge(
    'rate_limit_tokens',
    "Whole tokens in a rate-limited type's bucket now: the starts it would grant at once (0: commands over the limit wait).",
    ['type'],
  );

  // The limits per key and fair share: the stored limits, and the keys their commands wait under.
  const keyLimitMaxRunning = gauge(
    'key_limit_max_running',
    "A key-limited type's stored limit: the most of its commands RUNNING at once per key.",
    ['type'],
  );
  const fairShare = gauge('fair_share', '1 for a type whose claims take turns across keys (fairShare).', [
    'type',
  ]);
  const keyRateMaxStarts = gauge(
    'key_rate_limit_max_starts',
    "A type's stored rate limit per key: the most starts of one key in any window of its period.",
    ['type'],
  );
  const keyRatePeriod = gauge(
    'key_rate_limit_period_seconds',
    "The window of a type's rate limit per key, in seconds.",
    ['type'],
  );
  const keysWaiting = gauge(
    'keys_waiting',
    'Keys of a keyed type (key limit, fair share, rate limit per key) with due PENDING commands now.',
    ['type'],
  );
  const keysAtLimit = gauge(
    'keys_at_limit',
    'Keys of a key-limited type whose RUNNING commands reached the limit while more of theirs are due.',
    ['type'],
  );
  const keyRunningMost = gauge(
    'key_running_most',
    'The most RUNNING commands of one key of a keyed type waiting now (its busiest key).',
    ['type'],
  );
  const perKey = [
    keyLimitMaxRunning,
    fairShare,
    keyRateMaxStarts,
    keyRatePeriod,
    keysWaiting,
    keysAtLimit,
    keyRunningMost,
  ];

  const horizon = store.cleanupHorizon;
  if (horizon !== undefined) registerCleanupGauges(horizon, p, registry);

  // Every type seen since start keeps a series per status, zero included: a series that vanished
  // when its last dead letter went would leave an alert on it hanging instead of resolving. Types
  // are the executors' few names, so the set stays small.
  const typesSeen = new Set<string>();
  // Likewise a type resumed keeps its series at 0, so an alert on a long pause resolves.
  const pausedSeen = new Set<string>();

  async function refreshFromStore(): Promise<void> {
    try {
      const stats = await readStats(store);
      commands.reset();
      for (const type of Object.keys(stats.byType)) typesSeen.add(type);
      for (const type of typesSeen) {
        const counts = stats.byType[type];
        for (const status of COMMAND_STATUSES) commands.set({ status, type }, counts?.[status] ?? 0);
      }
      const pausedNow = new Set(stats.pausedTypes.map((p) => p.type));
      for (const type of pausedNow) pausedSeen.add(type);
      typePaused.reset();
      for (const type of pausedSeen) typePaused.set({ type }, pausedNow.has(type) ? 1 : 0);
      rateTokens.reset();
      for (const limit of stats.rateLimits) rateTokens.set({ type: limit.type }, limit.tokens);
      for (const g of perKey) g.reset();
      for (const limit of stats.keyLimits) {
        // A fair-share type is kept as a key limit never reached.
        if (limit.maxRunning >= LIMITS.keyLimit) fairShare.set({ type: limit.type }, 1);
        else keyLimitMaxRunning.set({ type: limit.type }, limit.maxRunning);
      }
      for (const limit of stats.keyRateLimits) {
        keyRateMaxStarts.set({ type: limit.type }, limit.maxStarts);
        keyRatePeriod.set({ type: limit.type }, limit.periodMs / 1_000);
      }
      for (const w of stats.keysWaiting) {
        keysWaiting.set({ type: w.type }, w.keys);
        keysAtLimit.set({ type: w.type }, w.atLimit);
        keyRunningMost.set({ type: w.type }, w.top[0]?.running ?? 0);
      }
      deadLetters.set(stats.byStatus.DEAD);
      pendingAge.set((stats.oldestPendingAgeMs ?? 0) / 1_000);
      storeUp.set(1);
    } catch {
      // Stale or zero counts would look healthy: NaN says "unknown", and store_up says why.
      commands.reset();
      typePaused.reset();
      rateTokens.reset();
      for (const g of perKey) g.reset();
      deadLetters.set(Number.NaN);
      pendingAge.set(Number.NaN);
      storeUp.set(0);
    }
  }
}

/**
 * What keeps the database from cleaning up the table's dead rows, read at scrape time where the
 * store can tell: an alert on `cleanup_held_seconds` hears of a long transaction elsewhere before
 * the backlog does.
 */
function registerCleanupGauges(horizon: CleanupHorizonProbe, p: string, registry: Registry): void {
  let reading: Promise<void> | null = null;
  const refresh = (): Promise<void> => {
    reading ??= read().finally(() => {
      reading = null;
    });
    return reading;
  };
  const gauge = (name: string, help: string) =>
    new Gauge({ name: `${p}${name}`, help, registers: [registry], collect: refresh });
  const held = gauge(
    'cleanup_held_seconds',
    'How long the oldest transaction, snapshot or slot has kept the database from cleaning up dead rows; 0 when none does.',
  );
  const deadRows = gauge(
    'dead_rows',
    'Dead row versions not cleaned up yet (PostgreSQL: the command table; InnoDB: the history list length).',
  );
  async function read(): Promise<void> {
    try {
      const h = await horizon.read();
      held.set((h.oldest?.heldForMs ?? 0) / 1_000);
      deadRows.set(h.deadRows ?? Number.NaN);
    } catch {
      held.set(Number.NaN);
      deadRows.set(Number.NaN);
    }
  }
}
