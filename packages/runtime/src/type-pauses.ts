import { requireStoredType, type CommandStore, type PausedType, type TypePauseStore } from '@asynccmd/core';
import { requireKnownType, typePausesOf } from './ops/type-pauses-view.js';
import type { StoreOutage } from './store-outage.js';
import { PeriodicService, type RunOutcome } from './services/periodic-service.js';

/**
 * How often every instance reads the paused types: a pause stops new claims of its type on every
 * instance within about this (on the instance that paused it, at once), and a resume lets them
 * start within about this.
 */
export const PAUSED_TYPES_REFRESH_MS = 1_000;

const NONE: ReadonlySet<string> = new Set();

/**
 * The types paused for every instance, as this runtime last read them: read at start and then
 * every PAUSED_TYPES_REFRESH_MS on a timer of its own, so claim rounds and IMMEDIATE dispatch go
 * by them without a read of their own. A failed read is a store outage like any other (reported,
 * backed off); the last known set stands meanwhile — a pause cannot have been written where the
 * table cannot be read.
 */
export class PausedTypes extends PeriodicService {
  readonly #store: TypePauseStore | null;
  /** Called when a type this instance went by as paused is no longer: its commands can be claimed. */
  readonly #onResumed: () => void;
  #paused: ReadonlySet<string> = NONE;
  #read: Promise<void>;
  #markRead: () => void = () => undefined;
  #everRead: boolean;
  /** Counts this instance's own pauses and resumes: a read that began before one must not undo it. */
  #localChanges = 0;

  constructor(store: CommandStore, outage: StoreOutage, onResumed: () => void) {
    super(
      {
        operation: 'typePauses',
        intervalMs: PAUSED_TYPES_REFRESH_MS,
        runOnStart: true,
        maxOutageDelayMs: 5_000,
      },
      outage,
    );
    this.#store = store.typePauses ?? null;
    this.#onResumed = onResumed;
    this.#everRead = this.#store === null;
    this.#read = this.#everRead ? Promise.resolve() : new Promise((resolve) => (this.#markRead = resolve));
  }

  /** Whether `known()` can be gone by without waiting: the first read was tried, or none is needed. */
  get settled(): boolean {
    return this.#everRead || !this.started;
  }

  /**
   * Resolves once the first read was tried — at once where the store keeps no pauses, and before
   * start (a round run by hand on a runtime never started goes by none).
   */
  firstRead(): Promise<void> {
    return this.started ? this.#read : Promise.resolve();
  }

  /** The paused types as last read (or as this instance last paused or resumed them). */
  known(): ReadonlySet<string> {
    return this.#paused;
  }

  /** This instance paused (`paused`) or resumed a type: go by that now, before the next read. */
  changed(type: string, paused: boolean): void {
    this.#localChanges++;
    if (paused === this.#paused.has(type)) return;
    const next = new Set(this.#paused);
    if (paused) next.add(type);
    else next.delete(type);
    this.#paused = next;
  }

  override start(): void {
    if (this.#store !== null) super.start();
  }

  /** Stopped before its first read (a runtime stopped right after start): nothing may wait for it. */
  protected override async onStop(): Promise<void> {
    this.#markRead();
  }

  protected async work(): Promise<RunOutcome> {
    try {
      const changes = this.#localChanges;
      const rows = await this.#store!.list();
      if (changes !== this.#localChanges) return 'done'; // the next read sees this instance's change
      const before = this.#paused;
      this.#paused = rows.length === 0 ? NONE : new Set(rows.map((r) => r.type));
      if ([...before].some((t) => !this.#paused.has(t))) this.#onResumed();
      return 'done';
    } finally {
      this.#everRead = true;
      this.#markRead();
    }
  }
}

/** What `runtime.typePauses` tells the runtime after a pause or a resume. */
export interface TypePauseEffects {
  /** This instance goes by the change at once, not at its next read. */
  readonly changed: (type: string, paused: boolean) => void;
  /** A type was resumed: claim rounds here and (where the store can tell them) on other instances. */
  readonly resumed: () => void;
  /** The types a pause may name (the executors' and submit-only ones): any other is UNKNOWN_COMMAND_TYPE. */
  readonly knownTypes: () => readonly string[];
}

/**
 * `runtime.typePauses`: pause a command type for every instance — no instance claims a command of
 * it (this one at once, the others within PAUSED_TYPES_REFRESH_MS), while submits of it are
 * accepted as always and commands already running or claimed finish — and resume it (this
 * instance claims them again at once, the others within PAUSED_TYPES_REFRESH_MS). The type
 * need not be one of this runtime's executors: another service may run it.
 */
export class TypePauses {
  readonly #store: CommandStore;
  readonly #effects: TypePauseEffects;

  constructor(store: CommandStore, effects: TypePauseEffects) {
    this.#store = store;
    this.#effects = effects;
  }

  /**
   * Pauses `type`; false when it was paused already (its time and reason stay). INVALID_ARGUMENT
   * for a type that is not 1–128 characters without NUL, or a reason over 1,000 characters;
   * UNKNOWN_COMMAND_TYPE for one this runtime neither executes nor submits (`submitOnlyTypes`).
   */
  async pause(type: string, reason?: string | null): Promise<boolean> {
    requireKnownType(requireStoredType('a type pause', type), this.#effects.knownTypes());
    const changed = await this.#pauses().pause(type, reason);
    this.#effects.changed(type, true);
    return changed;
  }

  /** Resumes `type`; false when it was not paused. */
  async resume(type: string): Promise<boolean> {
    const changed = await this.#pauses().resume(type);
    this.#effects.changed(type, false);
    if (changed) this.#effects.resumed();
    return changed;
  }

  /** Every paused type, by name, with when (database clock) and why. */
  async list(): Promise<PausedType[]> {
    return this.#pauses().list();
  }

  #pauses(): TypePauseStore {
    return typePausesOf(this.#store);
  }
}
