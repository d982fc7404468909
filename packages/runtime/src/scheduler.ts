import type { Clock, CommandStore, ReclaimedCommand, TokenSource } from '@asynccmd/core';
import type { CommandEvents } from './command-events.js';
import type { CommandRunner } from './command-runner.js';
import type { Dispatcher, RunHere } from './dispatcher.js';
import type { ExecutorRegistry } from './executor-registry.js';
import type { PoolSet } from './pool-set.js';
import type { PoolState } from './work-pool.js';
import type { StoreOutage } from './store-outage.js';
import { outageDelayMs, WakeSignal } from './wake-signal.js';

export interface SchedulerOptions {
  readonly pollIntervalMs: number;
  /** SCHEDULED commands claimed per round; they run one after another in the loop. */
  readonly scheduledBatchSize: number;
  readonly reclaimBatchSize: number;
  /**
   * Least time between two reclaims. Rounds that follow a full round or a freed pool slot come
   * quickly under load; they need not each look for hung commands too.
   */
  readonly reclaimIntervalMs: number;
  readonly maxRescues: number;
}

export interface SchedulerDeps {
  readonly store: CommandStore;
  readonly registry: ExecutorRegistry;
  readonly pools: PoolSet;
  readonly runner: CommandRunner;
  readonly dispatcher: Dispatcher;
  readonly events: CommandEvents;
  readonly clock: Clock;
  readonly tokens: TokenSource;
  readonly outage: StoreOutage;
}

export interface RoundResult {
  readonly reclaimed: number;
  readonly claimed: number;
  /** Some claim returned as many rows as asked: there is probably more, poll again at once. */
  readonly full: boolean;
  /** Some pool had no free capacity: wait for a slot rather than the poll interval. */
  readonly starved: boolean;
}

export interface SchedulerState {
  readonly running: boolean;
  readonly stopping: boolean;
  readonly types: readonly string[];
  readonly rounds: number;
  readonly lastRoundAt: Date | null;
  /** Consecutive failed rounds (store unreachable); 0 when healthy. */
  readonly consecutiveFailures: number;
  readonly inflight: number;
  readonly pools: readonly PoolState[];
}

/** Types claimed together: same runner (a pool or inline) and same lease. */
interface ClaimGroup {
  readonly pool: string | null;
  readonly leaseMs: number;
  readonly types: string[];
}

/**
 * The poll loop. Each round: reclaim hung commands (database clock; at most once per
 * `reclaimIntervalMs`) → claim due commands up to the
 * free capacity of the pools that will run them → dispatch by mode. Polls again at once after a
 * full round, else sleeps `pollIntervalMs` unless woken by a local submit, a store wake-up or a
 * freed pool slot. Store failures are reported once, backed off and survived.
 */
export class Scheduler {
  #wake = new WakeSignal();
  readonly #groups: readonly ClaimGroup[];
  #loop: Promise<void> | null = null;
  #stopping = false;
  #starved = false;
  #rounds = 0;
  #lastRoundAt: Date | null = null;
  #failures = 0;
  #lastReclaim = Number.NEGATIVE_INFINITY;
  #unsubscribe: (() => Promise<void>) | null = null;

  constructor(
    private readonly deps: SchedulerDeps,
    readonly options: SchedulerOptions,
  ) {
    this.#groups = claimGroups(deps.registry);
  }

  async runRound(): Promise<RoundResult> {
    const { store, clock, tokens, runner, dispatcher, pools, events } = this.deps;
    const began = performance.now();
    const reclaimed =
      began - this.#lastReclaim >= this.options.reclaimIntervalMs ? await this.#reclaim() : [];
    const now = clock.now();
    const budget = new Map<string | null, number>();
    const here: RunHere[] = [];
    let claimed = 0;
    let full = false;
    let starved = false;
    let failed: { error: unknown } | null = null;
    try {
      for (const group of this.#groups) {
        if (this.#stopping) break;
        const limit =
          budget.get(group.pool) ??
          (group.pool === null ? this.options.scheduledBatchSize : pools.get(group.pool).free);
        if (limit <= 0) {
          starved ||= group.pool !== null;
          continue;
        }
        const { types, leaseMs } = group;
        const rows = await store.claimDue({ types, limit, now, token: tokens.next(), leaseMs });
        budget.set(group.pool, limit - rows.length);
        claimed += rows.length;
        full ||= rows.length === limit;
        for (const row of rows) {
          const run = dispatcher.dispatch(runner.track(row, 'poll'));
          if (run) here.push(run);
        }
      }
    } catch (error) {
      failed = { error }; // what was claimed before the failure still runs
    }
    // SCHEDULED (and caller-runs) work runs here, serially; on stop the rest is released unstarted.
    for (const run of here) if (!this.#stopping) await run();
    if (failed) throw failed.error;
    this.#rounds++;
    this.#lastRoundAt = new Date();
    const durationMs = performance.now() - began;
    events.emit({ kind: 'round', claimed, reclaimed: reclaimed.length, durationMs });
    return { reclaimed: reclaimed.length, claimed, full, starved };
  }

  async #reclaim(): Promise<ReclaimedCommand[]> {
    const reclaimed = await this.deps.store.reclaimHung({
      limit: this.options.reclaimBatchSize,
      maxRescues: this.options.maxRescues,
    });
    this.#lastReclaim = performance.now();
    for (const r of reclaimed) {
      this.deps.events.emit({ kind: 'reclaimed', id: r.id, type: r.type, dead: r.status === 'DEAD' });
    }
    return reclaimed;
  }

  /** Starts the loop. Applications call AsyncCommands.start(), which also starts the heartbeats. */
  start(): void {
    if (this.#loop) return;
    this.#stopping = false;
    this.#wake = new WakeSignal(); // wake-ups from before the start: the first round runs at once anyway
    const wakeups = this.deps.store.wakeups;
    if (wakeups) {
      wakeups
        .subscribe(() => this.wake())
        .then(
          (unsubscribe) => {
            if (this.#stopping) void unsubscribe().catch(() => undefined);
            else this.#unsubscribe = unsubscribe;
          },
          (error: unknown) => this.deps.outage.failed('wakeups', error),
        );
    }
    this.#loop = this.#run();
  }

  /** Stops claiming; resolves once the current round (including its inline work) is over. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#wake.wake();
    await this.#loop;
    this.#loop = null;
    const unsubscribe = this.#unsubscribe;
    this.#unsubscribe = null;
    await unsubscribe?.().catch(() => undefined);
  }

  /** Ends the current sleep: new work was submitted in this process or announced by the store. */
  wake(): void {
    this.#wake.wake();
  }

  /** A pool slot came free: worth a round only if the last one was short of capacity. */
  capacityFreed(): void {
    if (!this.#starved) return;
    this.#starved = false;
    this.#wake.wake();
  }

  state(): SchedulerState {
    return {
      running: this.#loop !== null,
      stopping: this.#stopping,
      types: this.deps.registry.types(),
      rounds: this.#rounds,
      lastRoundAt: this.#lastRoundAt,
      consecutiveFailures: this.#failures,
      inflight: this.deps.runner.inflight().length,
      pools: this.deps.pools.state(),
    };
  }

  async #run(): Promise<void> {
    while (!this.#stopping) {
      let again = false;
      try {
        const round = await this.runRound();
        this.deps.outage.succeeded('poll');
        this.#failures = 0;
        this.#starved = round.starved;
        again = round.full;
      } catch (error) {
        this.#failures = this.deps.outage.failed('poll', error);
        await this.#wake.wait(outageDelayMs(this.#failures, Math.max(this.options.pollIntervalMs, 5_000)));
        continue;
      }
      // Even a backlog drained at full speed must let timers and I/O (heartbeats) run between rounds.
      if (again) await new Promise<void>((resolve) => setImmediate(resolve));
      else await this.#wake.wait(this.options.pollIntervalMs);
    }
  }
}

function claimGroups(registry: ExecutorRegistry): ClaimGroup[] {
  const groups = new Map<string, ClaimGroup>();
  for (const entry of registry.entries()) {
    const key = `${entry.pool ?? ''}\u0000${entry.leaseMs}`;
    const group = groups.get(key);
    if (group) group.types.push(entry.type);
    else groups.set(key, { pool: entry.pool, leaseMs: entry.leaseMs, types: [entry.type] });
  }
  return [...groups.values()];
}
