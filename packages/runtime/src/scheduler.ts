import type { ClaimDueParams, ClaimedCommand, Clock, CommandStore, TokenSource } from '@asynccmd/core';
import { AdaptiveQueue } from './adaptive-queue.js';
import { MAX_OUTCOME_BATCH } from './outcome-writer.js';
import type { CommandEvents } from './command-events.js';
import type { CommandRunner } from './command-runner.js';
import type { Dispatcher, RunHere } from './dispatcher.js';
import type { ExecutorRegistry } from './executor-registry.js';
import type { PoolSet } from './pool-set.js';
import type { PoolState, WorkPool } from './work-pool.js';
import { outageDelayMs, type StoreOutage } from './store-outage.js';
import type { DeclaredTypeLimits } from './type-limits.js';
import type { DeclaredKeyLimits, DeclaredKeyRateLimits } from './key-limits.js';
import { MIN_RATE_WAKE_MS, type DeclaredRateLimits } from './rate-limits.js';
import type { PausedTypes } from './type-pauses.js';
import { WakeSignal, type WakeReason } from './wake-signal.js';

export interface SchedulerOptions {
  readonly pollIntervalMs: number;
  /**
   * SCHEDULED commands claimed per round; they run one after another in the loop. Undefined:
   * adaptive, as a pool's queue with one slot (see AdaptiveQueue).
   */
  readonly scheduledBatchSize: number | undefined;
  /** The SCHEDULED types take turns in each round (RuntimeOptions.scheduledTypeTurns). */
  readonly scheduledTypeTurns: boolean;
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
  /** This runtime's name in its claims. */
  readonly instance: string;
  /** The `typeLimits` option: claims of these types stay within their stored limits. */
  readonly typeLimits: DeclaredTypeLimits;
  /** Types paused for every instance: left out of every claim. */
  readonly pausedTypes: PausedTypes;
  /** The `rateLimits` option: each claim of these types spends a token of its bucket. */
  readonly rateLimits: DeclaredRateLimits;
  /** The `keyLimits` option: claims of these types stay within each key's stored limit. */
  readonly keyLimits?: DeclaredKeyLimits;
  /** The `keyRateLimits` option: claims of these types spend their keys' tokens. */
  readonly keyRateLimits?: DeclaredKeyRateLimits;
}

export interface RoundResult {
  /** Hung commands the reclaimer took back since the previous round. */
  readonly reclaimed: number;
  readonly claimed: number;
  /** Some claim returned as many rows as asked: there is probably more, poll again at once. */
  readonly full: boolean;
  /** Some pool with work waiting had too little room: the next round comes when it frees enough. */
  readonly starved: boolean;
}

/**
 * How many commands a round claims at most per group, beside the room of its pool: null for no
 * more than that room. A round woken only because ordering keys were freed here claims at most
 * one command per freed key (see Scheduler.freed).
 */
export type RoundCap = number | null;

export interface SchedulerState {
  readonly running: boolean;
  readonly stopping: boolean;
  readonly types: readonly string[];
  readonly rounds: number;
  readonly lastRoundAt: Date | null;
  /** Consecutive failed rounds (store unreachable); 0 when healthy. */
  readonly consecutiveFailures: number;
  readonly inflight: number;
  /**
   * SCHEDULED commands the next round claims at most: the adaptive size now, or
   * `scheduledBatchSize` when that fixes it.
   */
  readonly scheduledClaim: number;
  /** The SCHEDULED types take turns in each round (RuntimeOptions.scheduledTypeTurns). */
  readonly scheduledTypeTurns: boolean;
  /** Of this instance's types, those paused for every instance (as last read), by name. */
  readonly pausedTypes: readonly string[];
  readonly pools: readonly PoolState[];
}

/** Types claimed together: same runner (a pool or inline) and same lease. */
interface ClaimGroup {
  readonly pool: WorkPool | null;
  readonly leaseMs: number;
  readonly types: string[];
  /** Those of `types` with a limit (claimed within it); null when none has one. */
  limitedTypes: string[] | null;
  /**
   * Work is probably waiting: the last claim came back full, or there was no room to look. A
   * refill round claims only for hungry groups.
   */
  hungry: boolean;
}

const NO_POOLS: ReadonlySet<WorkPool> = new Set();

/**
 * The poll loop. Each round claims due commands up to the free room of the pools that will run
 * them and dispatches them by mode. Polls again at once after a full round; else sleeps
 * `pollIntervalMs` unless woken by a local submit, a store wake-up, or a busy pool freeing
 * `refillAt` places (or fewer that waited `refillWaitMs`) — so under load claims come in batches,
 * not one statement per freed slot.
 * Hung commands are reclaimed by the runtime's HungReclaimer on its own timer, outside the rounds,
 * which tells the loop what it reclaimed. Store failures are reported once, backed off and survived.
 */
export class Scheduler {
  #wake = new WakeSignal();
  readonly #groups: readonly ClaimGroup[];
  #loop: Promise<void> | null = null;
  #stopping = false;
  #rounds = 0;
  /** Which type of a pool whose types take turns claims first in the next round. */
  #turn = 0;
  #lastRoundAt: Date | null = null;
  #failures = 0;
  #reclaimed = 0;
  /** Pools whose free places have waited `refillWaitMs`: the next refill takes what is free. */
  readonly #topUp = new Set<WorkPool>();
  readonly #topUpTimers = new Map<WorkPool, NodeJS.Timeout>();
  #unsubscribe: (() => Promise<void>) | null = null;
  /** The wake-up armed for a rate-limited type's next token, if any. */
  #tokenWake: { readonly at: number; readonly timer: NodeJS.Timeout } | null = null;
  /**
   * Commands of ordering keys that succeeded here since the last round began (see `freed`), and
   * whether any other wake-up came meanwhile: a round woken by freed keys alone is sized by them.
   */
  #freedKeys = 0;
  #otherWake = true;
  /**
   * The SCHEDULED claim's size when it adapts: the loop is its one runner, so it claims the command
   * it runs now and as many as it would run in about two claim round trips — hundreds of fast
   * commands per statement, one at a time of slow ones (no instance sits on work others could start).
   */
  readonly #inline: AdaptiveQueue | null;
  /** The outcome writes of the last round's inline work, still going out while the next claims. */
  #inlineWrites: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly deps: SchedulerDeps,
    readonly options: SchedulerOptions,
  ) {
    this.#inline = options.scheduledBatchSize === undefined ? new AdaptiveQueue(1) : null;
    this.#groups = claimGroups(deps.registry, deps.pools);
    for (const group of this.#groups) group.limitedTypes = deps.typeLimits.among(group.types);
  }

  /** The hung reclaimer took `count` back, `due` of them claimable now: the next round reports them. */
  reclaimed(count: number, due: number): void {
    this.#reclaimed += count;
    if (due > 0) this.wake();
  }

  /**
   * One round. `poll` and `work` claim for every group whatever room there is; `refill` only for
   * hungry groups whose pool has at least `refillAt` free places, or whose free places have waited
   * the pool's `refillWaitMs`.
   */
  async runRound(reason: WakeReason = 'poll', cap: RoundCap = null): Promise<RoundResult> {
    const { clock, tokens, runner, dispatcher, events, instance } = this.deps;
    const began = performance.now();
    const reclaimed = this.#reclaimed;
    this.#reclaimed = 0;
    const refill = reason === 'refill';
    // Pools whose freed places waited long enough for company: this refill takes whatever is free.
    const topUp = this.#topUp.size === 0 ? NO_POOLS : new Set(this.#topUp);
    this.#topUp.clear();
    let now: Date | null = null;
    const budget = new Map<WorkPool | null, number>();
    const here: RunHere[] = [];
    let claimed = 0;
    let full = false;
    let starved = false;
    let failed: { error: unknown } | null = null;
    try {
      await this.deps.pausedTypes.firstRead();
      const paused = this.deps.pausedTypes.known();
      for (const group of this.#groups) {
        if (this.#stopping) break;
        if (refill && !group.hungry) continue;
        const { pool, leaseMs } = group;
        const types = paused.size === 0 ? group.types : group.types.filter((t) => !paused.has(t));
        if (types.length === 0) {
          group.hungry = false; // nothing it may claim until a resume, which wakes the loop
          continue;
        }
        const room = budget.get(pool) ?? (pool === null ? this.#inlineRoom() : pool.free);
        // The cap is for groups whose last claim found all there was; where work was left waiting,
        // a wake-up claims the room, as always.
        const limit = cap === null || group.hungry ? room : Math.min(room, cap);
        if (limit <= 0 || (refill && pool !== null && limit < pool.refillAt && !topUp.has(pool))) {
          // No (useful) room: claiming now would leave rows sitting in memory, or cost a statement
          // for a slot or two. The pool wakes the loop once it has freed enough.
          group.hungry = true;
          starved ||= pool !== null;
          continue;
        }
        now ??= clock.now();
        if (pool) this.#disarmTopUp(pool); // claiming for it now; if still short, re-armed below
        const claimStarted = performance.now();
        const keyedTypes = this.deps.keyLimits?.among(types) ?? null;
        if (keyedTypes !== null) await this.deps.keyLimits?.ready();
        const keyRatedTypes = this.deps.keyRateLimits?.among(types) ?? null;
        if (keyRatedTypes !== null) await this.deps.keyRateLimits?.ready();
        const params = {
          types,
          limit,
          now,
          token: tokens.next(),
          leaseMs,
          instance,
          ...(keyedTypes === null ? {} : { keyedTypes }),
          ...(keyRatedTypes === null ? {} : { keyRatedTypes }),
        };
        const limitedTypes =
          paused.size === 0 || group.limitedTypes === null
            ? group.limitedTypes
            : this.deps.typeLimits.among(types);
        const rows =
          (pool === null ? this.options.scheduledTypeTurns : pool.typeTurns) && types.length > 1
            ? await this.#claimInTurns(params, limitedTypes)
            : await this.#claimOf(params, limitedTypes);
        if (keyRatedTypes !== null) this.#wakeForKeyTokens(keyRatedTypes, rows, limit);
        const claimMs = performance.now() - claimStarted;
        if (pool) pool.claimTook(claimMs);
        else this.#inline?.claimTook(claimMs);
        budget.set(pool, room - rows.length);
        claimed += rows.length;
        // A claim that came back short found all there was. A full one means more is probably
        // waiting — unless it stopped at the cap, not at the room: then it says nothing of the rest.
        const capped = limit < room;
        if (rows.length < limit) group.hungry = false;
        else if (!capped) group.hungry = true;
        full ||= group.hungry && !capped;
        for (const row of rows) {
          // Claimed for the pool's free places: it queues them all (SCHEDULED: run here).
          const run = dispatcher.dispatch(runner.track(row, 'poll', claimStarted), pool !== null);
          if (run) here.push(run);
        }
      }
    } catch (error) {
      failed = { error }; // what was claimed before the failure still runs
    }
    await this.#runHere(here);
    if (failed) throw failed.error;
    for (const group of this.#groups) {
      if (group.pool && group.hungry && group.pool.free > 0) this.#armTopUp(group.pool);
    }
    this.#rounds++;
    this.#lastRoundAt = new Date();
    const durationMs = performance.now() - began;
    if (events.listensTo('round')) events.emit({ kind: 'round', claimed, reclaimed, durationMs });
    return { reclaimed, claimed, full, starved };
  }

  /** The claim of `params.types`, `limitedTypes` of them within their type limits and rated ones within their rates. */
  async #claimOf(params: ClaimDueParams, limitedTypes: readonly string[] | null): Promise<ClaimedCommand[]> {
    const rated = this.deps.rateLimits.among(params.types);
    if (rated !== null) return this.#claimWithinRates(params, limitedTypes, rated);
    if (limitedTypes !== null) await this.deps.typeLimits.ready();
    return this.deps.store.claimDue(limitedTypes === null ? params : { ...params, limitedTypes });
  }

  /**
   * A group's claim when its types take turns (PoolOptions.typeTurns, scheduledTypeTurns): the room shared evenly among
   * the types, each claimed alone for its share, starting one type further each round; then what
   * types that had less left over, shared among those that came back full, until the room is
   * claimed or every type came back short (each pass drops one at least: full shares fill the
   * room), so a round that ends short found all there was, as the scheduler takes it.
   */
  async #claimInTurns(
    params: ClaimDueParams,
    limitedTypes: readonly string[] | null,
  ): Promise<ClaimedCommand[]> {
    const { types, limit } = params;
    const first = this.#turn++ % types.length;
    let open = [...types.slice(first), ...types.slice(0, first)];
    const claimed: ClaimedCommand[] = [];
    while (open.length > 0 && claimed.length < limit) {
      const share = Math.ceil((limit - claimed.length) / open.length);
      const full: string[] = [];
      for (const type of open) {
        const want = Math.min(share, limit - claimed.length);
        if (want <= 0) break;
        const rows = await this.#claimOf(
          { ...ofType(params, type), limit: want, token: this.deps.tokens.next() },
          limitedTypes?.includes(type) === true ? [type] : null,
        );
        claimed.push(...rows);
        if (rows.length === want) full.push(type);
      }
      open = full;
    }
    return claimed;
  }

  /**
   * A group's claim when some of its types have a rate limit: each of those alone, for as many as
   * its bucket grants of what the round would claim (within its type limit too), the unused tokens
   * given back; then the other types, claimed as always, for what is left. A type that ran out of
   * tokens with work probably waiting wakes the loop when its next token is due.
   */
  async #claimWithinRates(
    params: ClaimDueParams,
    limitedTypes: readonly string[] | null,
    rated: readonly string[],
  ): Promise<ClaimedCommand[]> {
    const { store, rateLimits, typeLimits, tokens } = this.deps;
    const claimed: ClaimedCommand[] = [];
    for (const type of rated) {
      const want = params.limit - claimed.length;
      if (want <= 0) return claimed;
      const grant = await rateLimits.take(type, want);
      if (grant.granted === 0) {
        // Empty: spent here or elsewhere, so the type is being claimed. Try again once it refills.
        if (grant.nextTokenInMs !== null) this.#wakeForToken(grant.nextTokenInMs);
        continue;
      }
      const limited = limitedTypes?.includes(type) === true;
      let rows: ClaimedCommand[];
      try {
        if (limited) await typeLimits.ready();
        rows = await store.claimDue({
          ...params,
          types: [type],
          limit: grant.granted,
          // A token of its own: the claim's rows are read back by token where the store does so.
          token: tokens.next(),
          ...(limited ? { limitedTypes: [type] } : {}),
        });
      } catch (error) {
        await rateLimits.giveBack(type, grant.granted, grant.takenAt);
        throw error;
      }
      claimed.push(...rows);
      if (rows.length < grant.granted) {
        await rateLimits.giveBack(type, grant.granted - rows.length, grant.takenAt);
      } else if (grant.granted < want && grant.nextTokenInMs !== null) {
        this.#wakeForToken(grant.nextTokenInMs);
      }
    }
    const others = params.types.filter((t) => !rated.includes(t));
    if (others.length === 0 || claimed.length >= params.limit) return claimed;
    const limitedOthers = limitedTypes === null ? null : this.deps.typeLimits.among(others);
    if (limitedOthers !== null) await typeLimits.ready();
    const plain = { ...params, types: others, limit: params.limit - claimed.length, token: tokens.next() };
    claimed.push(
      ...(await store.claimDue(limitedOthers === null ? plain : { ...plain, limitedTypes: limitedOthers })),
    );
    return claimed;
  }

  /** Wakes the loop in `ms` (at least MIN_RATE_WAKE_MS), unless a wake-up for a token is due sooner. */
  #wakeForToken(ms: number): void {
    if (this.#stopping) return;
    const at = performance.now() + Math.max(ms, MIN_RATE_WAKE_MS);
    if (this.#tokenWake !== null && this.#tokenWake.at <= at) return;
    if (this.#tokenWake !== null) clearTimeout(this.#tokenWake.timer);
    const timer = setTimeout(() => {
      this.#tokenWake = null;
      this.wake();
    }, at - performance.now());
    this.#tokenWake = { at, timer };
  }

  /**
   * A claim of key-rated types that took some of them but fewer than it could: keys are probably
   * waiting for tokens, so the loop wakes when the next is due (a claim that takes none of them,
   * a token's interval after one that did, finds nothing waiting: then the poll interval stands).
   */
  #wakeForKeyTokens(keyRated: readonly string[], rows: readonly ClaimedCommand[], limit: number): void {
    if (rows.length >= limit || !rows.some((r) => keyRated.includes(r.type))) return;
    const intervalMs = this.deps.keyRateLimits?.tokenIntervalMs(keyRated);
    if (intervalMs !== undefined && intervalMs !== null) this.#wakeForToken(intervalMs);
  }

  /** SCHEDULED commands a round claims now: adaptive, at most as many as one outcome write takes. */
  #inlineRoom(): number {
    const adaptive = Math.min(1 + (this.#inline?.size ?? 0), MAX_OUTCOME_BATCH);
    return this.options.scheduledBatchSize ?? adaptive;
  }

  /**
   * Runs SCHEDULED (and caller-runs) work here, one after another; on stop the rest is released
   * unstarted. The next starts once the last has run, not once its outcome is written: the
   * outcomes of the round go out together (the runner's writes coalesce) while the next round
   * claims, as a pool's slot frees before its outcome is written. The round is over once the
   * previous round's outcomes are written: no more than two rounds' go unwritten.
   */
  async #runHere(here: readonly RunHere[]): Promise<void> {
    const { runner } = this.deps;
    const recorded: Promise<void>[] = [];
    for (const work of here) {
      if (this.#stopping) break;
      const started = performance.now();
      const tail = await runner.run(work.execution, work.runner);
      if (work.runner === 'inline') this.#inline?.executionTook(performance.now() - started);
      if (tail) recorded.push(tail.recorded);
    }
    const previous = this.#inlineWrites;
    // Never rejects: the runner reports a failed write itself.
    this.#inlineWrites = recorded.length === 0 ? previous : Promise.all([previous, ...recorded]);
    await previous;
  }

  /** Starts the loop. Applications call AsyncCommands.start(), which also starts the background services. */
  start(): void {
    if (this.#loop) return;
    this.#stopping = false;
    this.#wake = new WakeSignal(); // wake-ups from before the start: the first round runs at once anyway
    this.#otherWake = true;
    for (const group of this.#groups) group.hungry = true;
    const wakeups = this.deps.store.wakeups;
    if (wakeups) {
      let sameTurn = true;
      setImmediate(() => (sameTurn = false));
      wakeups
        .subscribe(() => this.wake())
        .then(
          (unsubscribe) => {
            if (this.#stopping) return void unsubscribe().catch(() => undefined);
            this.#unsubscribe = unsubscribe;
            // The first round does not wait for the subscription. One that went live only later
            // (a LISTEN connection to open) missed what was committed after that round's claims:
            // one more round finds it. One settled within this turn was live already.
            if (!sameTurn) this.wake();
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
    this.#disarmTopUps();
    if (this.#tokenWake !== null) clearTimeout(this.#tokenWake.timer);
    this.#tokenWake = null;
    await this.#loop;
    await this.#inlineWrites; // the last round's outcomes
    this.#loop = null;
    const unsubscribe = this.#unsubscribe;
    this.#unsubscribe = null;
    await unsubscribe?.().catch(() => undefined);
  }

  /** Ends the current sleep: new work was submitted in this process or announced by the store. */
  wake(): void {
    this.#otherWake = true;
    this.#wake.wake();
  }

  /**
   * A command this instance ran made another claimable: the next of its ordering key, once its
   * success is written. The next round claims here, at once. When nothing else woke the loop,
   * that round asks for at most one command per key freed since the last round: the claim walks
   * the claim order past every command held back by an earlier one of its key, and stops only
   * when it has as many as it asked for — asking for more than the freed keys can give sends it
   * over the whole held-back backlog, on every round. The other instances are woken (store
   * wake-ups) only when this round had no room for all it may find; waking them for every freed
   * key would send each of them on that walk for keys this instance is taking itself.
   */
  freed(): void {
    this.#freedKeys += 1;
    this.#wake.wake();
  }

  /**
   * A slot of `pool` came free: worth a round once a group with work waiting for it has
   * `refillAt` free places — or, when fewer come free (the other slots hold long-running
   * commands), once the first of them has waited the pool's `refillWaitMs`. Arriving during a
   * round, the wake-up makes the next wait return at once.
   */
  capacityFreed(pool: WorkPool): void {
    const free = pool.free;
    if (this.#stopping || free === 0 || !this.#groups.some((g) => g.pool === pool && g.hungry)) return;
    if (free >= pool.refillAt) this.#wake.wake('refill');
    else this.#armTopUp(pool);
  }

  #armTopUp(pool: WorkPool): void {
    if (this.#stopping || this.#topUpTimers.has(pool)) return;
    const timer = setTimeout(() => {
      this.#topUpTimers.delete(pool);
      this.#topUp.add(pool);
      this.#wake.wake('refill');
    }, pool.refillWaitMs);
    this.#topUpTimers.set(pool, timer);
  }

  #disarmTopUp(pool: WorkPool): void {
    const timer = this.#topUpTimers.get(pool);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.#topUpTimers.delete(pool);
  }

  #disarmTopUps(): void {
    for (const timer of this.#topUpTimers.values()) clearTimeout(timer);
    this.#topUpTimers.clear();
  }

  /** Some group with work waiting has room for a refill now (else its pool wakes the loop later). */
  #canRefill(): boolean {
    return this.#groups.some((g) => g.hungry && (g.pool === null || g.pool.free >= g.pool.refillAt));
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
      scheduledClaim: this.#inlineRoom(),
      scheduledTypeTurns: this.options.scheduledTypeTurns,
      pausedTypes: this.deps.registry.types().filter((t) => this.deps.pausedTypes.known().has(t)),
      pools: this.deps.pools.state(),
    };
  }

  async #run(): Promise<void> {
    let reason: WakeReason = 'work';
    while (!this.#stopping) {
      let full: boolean;
      const freedKeys = this.#freedKeys;
      const cap = reason === 'work' && !this.#otherWake && freedKeys > 0 ? freedKeys : null;
      this.#freedKeys = 0;
      this.#otherWake = false;
      try {
        const round = await this.runRound(reason, cap);
        full = round.full;
        if (freedKeys > 0 && (round.full || round.starved)) this.deps.store.wakeups?.notify();
        this.deps.outage.succeeded('poll');
        this.#failures = 0;
      } catch (error) {
        if (freedKeys > 0) this.deps.store.wakeups?.notify(); // others may claim what this one could not
        this.#failures = this.deps.outage.failed('poll', error);
        await this.#wake.wait(outageDelayMs(this.#failures, Math.max(this.options.pollIntervalMs, 5_000)));
        reason = 'work';
        continue;
      }
      if (full && this.#canRefill()) {
        // Even a backlog drained at full speed must let timers and I/O (heartbeats) run between
        // rounds. A wake-up that came meanwhile widens the next round to every group.
        await nextTurn();
        reason = this.#wake.take() === 'work' ? 'work' : 'refill';
      } else {
        reason = await this.#wake.wait(this.options.pollIntervalMs);
        // Woken without a timer: with a store that answers within microtasks (SQLite), the round's
        // commands free their slots and wake the loop before the round is over, so rounds would
        // chain without ever letting outcome writes, heartbeats or I/O run.
        if (reason !== 'poll') await nextTurn();
      }
      // Wake-ups that came before this round's claims are sent are answered by them: what caused
      // them (a commit, a written outcome) is visible to those claims. Left pending, they would run
      // a second round at once — typically while the outcomes of the commands this round claims
      // are still being written, so it finds every ordering key they hold still held and claims
      // nothing, after walking the whole held-back backlog.
      if (this.#wake.take() === 'work') reason = 'work';
    }
  }
}

/** Resolves after the event loop's current turn: timers, I/O and setImmediate callbacks run first. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** `params` for `type` alone: its own key limits and key rates, if it has them. */
function ofType(params: ClaimDueParams, type: string): ClaimDueParams {
  const { keyedTypes, keyRatedTypes, limitedTypes: _limited, ...rest } = params;
  return {
    ...rest,
    types: [type],
    ...(keyedTypes?.includes(type) === true ? { keyedTypes: [type] } : {}),
    ...(keyRatedTypes?.includes(type) === true ? { keyRatedTypes: [type] } : {}),
  };
}

function claimGroups(registry: ExecutorRegistry, pools: PoolSet): ClaimGroup[] {
  const groups = new Map<string, ClaimGroup>();
  for (const entry of registry.entries()) {
    const key = `${entry.pool ?? ''}\u0000${entry.leaseMs}`;
    const group = groups.get(key);
    if (group) group.types.push(entry.type);
    else {
      const pool = entry.pool === null ? null : pools.get(entry.pool);
      groups.set(key, {
        pool,
        leaseMs: entry.leaseMs,
        types: [entry.type],
        limitedTypes: null,
        hungry: true,
      });
    }
  }
  return [...groups.values()];
}
