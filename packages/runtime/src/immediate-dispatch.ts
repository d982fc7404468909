import type {
  ClaimByIdParams,
  ClaimedCommand,
  Clock,
  CommandId,
  CommandStore,
  TokenSource,
} from '@asynccmd/core';
import type { CommandRunner } from './command-runner.js';
import type { Dispatcher } from './dispatcher.js';
import type { ExecutorRegistry } from './executor-registry.js';
import type { StoreOutage } from './store-outage.js';
import type { DeclaredRateLimits } from './rate-limits.js';
import type { DeclaredTypeLimits } from './type-limits.js';
import type { DeclaredKeyLimits, DeclaredKeyRateLimits } from './key-limits.js';
import type { PausedTypes } from './type-pauses.js';

export interface ImmediateDispatchDeps {
  readonly store: CommandStore;
  readonly registry: ExecutorRegistry;
  readonly runner: CommandRunner;
  readonly dispatcher: Dispatcher;
  readonly clock: Clock;
  readonly tokens: TokenSource;
  readonly outage: StoreOutage;
  /** This runtime's name in its claims. */
  readonly instance: string;
  /** The `typeLimits` option: a command of these types is claimed by id only within its limit. */
  readonly typeLimits: DeclaredTypeLimits;
  /** The `rateLimits` option: a command of these types is claimed by id only with a token. */
  readonly rateLimits: DeclaredRateLimits;
  /** The `keyLimits` option: a command of these types is never claimed by id (the poll loop claims it within its key's limit). */
  readonly keyLimits?: DeclaredKeyLimits;
  /** The `keyRateLimits` option: as keyLimits, never claimed by id. */
  readonly keyRateLimits?: DeclaredKeyRateLimits;
  /** Types paused for every instance: their commands stay PENDING until resumed. */
  readonly pausedTypes: PausedTypes;
  /** False before start and once stopping: then the poll loop (here or elsewhere) runs them. */
  readonly accepting: () => boolean;
}

/** A claim by id that the store runs with a transaction's COMMIT (capabilities.commitRiding). */
export interface ClaimOnCommit {
  readonly id: CommandId;
  readonly claimed: Promise<ClaimedCommand | null>;
  /** When the claim was asked for (performance.now()), before the COMMIT it rides on. */
  readonly sentAt: number;
}

/**
 * IMMEDIATE mode after commit: claims each command by id (atomic; null means another instance or
 * the poll loop got it first) and hands it to its pool — or runs it here when the pool is full.
 * Where the store can, the first one's claim rides on the COMMIT itself (claimOnCommit), a round
 * trip sooner. If a claim fails or the process dies first, the command is still PENDING and the
 * poll loop claims it.
 */
export class ImmediateDispatch {
  readonly #types: string[];
  readonly #leaseMs: number;
  /** The IMMEDIATE types with a limit; null when none has one (claims by id stay plain). */
  readonly #limitedTypes: string[] | null;
  /** The IMMEDIATE types with a rate limit: claimed by id only with a token, never with the commit. */
  readonly #rated: ReadonlySet<string>;
  /** The IMMEDIATE types without one: claimed as always. */
  readonly #plain: string[];

  constructor(private readonly deps: ImmediateDispatchDeps) {
    const entries = deps.registry.entries().filter((e) => e.mode === 'IMMEDIATE');
    this.#types = entries.map((e) => e.type);
    // One claim statement per id must pick one lease; the longest is safe, and the next heartbeat
    // sets each command's own.
    this.#leaseMs = Math.max(0, ...entries.map((e) => e.leaseMs));
    this.#limitedTypes = deps.typeLimits.among(this.#types);
    this.#rated = new Set(deps.rateLimits.among(this.#types) ?? []);
    const keyed = new Set([
      ...(deps.keyLimits?.among(this.#types) ?? []),
      ...(deps.keyRateLimits?.among(this.#types) ?? []),
    ]);
    this.#plain =
      this.#rated.size === 0 && keyed.size === 0
        ? this.#types
        : this.#types.filter((t) => !this.#rated.has(t) && !keyed.has(t));
  }

  /**
   * Asks the store to claim the first of `ids` right after `tx` commits, in the commit's round
   * trip; null when the store cannot, or this runtime is not running. Call before COMMIT, then pass
   * the result to dispatch().
   */
  claimOnCommit(tx: unknown, ids: readonly CommandId[]): ClaimOnCommit | null {
    const [id] = ids;
    const riding = this.deps.store.capabilities.commitRiding;
    if (id === undefined || this.#types.length === 0 || !this.deps.accepting() || !riding) return null;
    const paused = this.deps.pausedTypes;
    const types = paused.settled ? this.#unpaused(paused.known()) : [];
    if (types.length === 0) return null; // all paused, or not read yet: dispatch() claims after commit
    const sentAt = performance.now();
    const claimed = riding.claimById(tx, this.#params(id, types));
    if (!claimed) return null;
    claimed.catch(() => undefined); // dispatch() reads the failure; never an unhandled rejection
    return { id, claimed, sentAt };
  }

  /**
   * Claims and dispatches each id in turn; caller-runs work runs here before the next id is claimed
   * (back-pressure on the submitter). Returns how many were not claimed here (not IMMEDIATE, taken
   * by someone else, or left to the poll loop). Never rejects: the transaction has committed.
   * `typeOf` tells the type of the ids the client knows: one of a rate-limited type is claimed only
   * with a token of its bucket (none left: it stays PENDING for a poll loop), and one of unknown
   * type only among the types without a rate limit.
   */
  async dispatch(
    ids: readonly CommandId[],
    onCommit: ClaimOnCommit | null = null,
    typeOf: ReadonlyMap<CommandId, string> | null = null,
  ): Promise<number> {
    const { store, runner, dispatcher, outage } = this.deps;
    if (this.#types.length === 0) return ids.length;
    // Those paused stay PENDING, for a poll loop after the resume. (A claim that rode on the commit
    // was asked with the types as they were then: what it claimed runs.)
    await this.deps.pausedTypes.firstRead();
    const paused = this.deps.pausedTypes.known();
    const types = this.#unpaused(paused);
    let claimed = 0;
    for (const id of ids) {
      const rideOn = onCommit?.id === id;
      const type = this.#rated.size === 0 ? undefined : typeOf?.get(id);
      const rated = type !== undefined && this.#rated.has(type) && !paused.has(type) ? type : null;
      if (!rideOn && (!this.deps.accepting() || (rated === null && types.length === 0))) continue;
      let row: ClaimedCommand | null;
      // A claim that rode on the commit was asked for before the COMMIT: its lease runs from no earlier.
      const sentAt = rideOn ? onCommit.sentAt : performance.now();
      try {
        // The claim with the commit was asked among the types without a rate limit only: one of a
        // rate-limited type it passed over is claimed here, with a token.
        row = rideOn ? await onCommit.claimed : null;
        if (row === null && (!rideOn || rated !== null) && this.deps.accepting()) {
          row =
            rated !== null
              ? await this.#claimWithToken(id, rated)
              : await store.claimById(this.#params(id, types));
        }
        outage.succeeded('claimById');
      } catch (error) {
        outage.failed('claimById', error);
        break;
      }
      if (!row) continue;
      const execution = runner.track(row, 'immediate', sentAt);
      if (!this.deps.accepting()) {
        // Claimed with the commit while this runtime began to stop: back to PENDING, for a poll loop.
        await runner.release([execution]);
        continue;
      }
      claimed++;
      const runHere = dispatcher.dispatch(execution);
      if (runHere) await runner.execute(execution, runHere.runner);
    }
    return ids.length - claimed;
  }

  /** The IMMEDIATE types without a rate limit not in `paused`. */
  #unpaused(paused: ReadonlySet<string>): readonly string[] {
    return paused.size === 0 ? this.#plain : this.#plain.filter((t) => !paused.has(t));
  }

  /** Claims `id` of rate-limited `type` with one token of its bucket; none left: null, it stays PENDING. */
  async #claimWithToken(id: CommandId, type: string): Promise<ClaimedCommand | null> {
    const { rateLimits, store } = this.deps;
    const grant = await rateLimits.take(type, 1);
    if (grant.granted === 0) return null;
    let row: ClaimedCommand | null;
    try {
      row = await store.claimById(this.#params(id, [type]));
    } catch (error) {
      await rateLimits.giveBack(type, 1, grant.takenAt);
      throw error;
    }
    if (row === null) await rateLimits.giveBack(type, 1, grant.takenAt);
    return row;
  }

  /** The claim of `id` if it is of one of `types` (the IMMEDIATE types not paused). */
  #params(id: CommandId, types: readonly string[]): ClaimByIdParams {
    const { clock, tokens, instance } = this.deps;
    const params = { id, now: clock.now(), token: tokens.next(), leaseMs: this.#leaseMs, types, instance };
    // Before the limits are stored, a limited command is refused (no stored limit) and stays PENDING.
    return this.#limitedTypes === null ? params : { ...params, limitedTypes: this.#limitedTypes };
  }
}
