import { type WakeupChannel } from '@asynccmd/core';
import type { SqliteDatabase } from './store.js';
import { wakeProbeDelayMs } from '@asynccmd/core/store-kit';

/**
 * Wake-ups across processes (and connections) without a broker: SQLite's `PRAGMA data_version`
 * changes whenever another connection commits to the database file, and reading it touches no
 * table (it reads the shared WAL index header). A probe reads it every 5 ms while the file keeps
 * changing, backing off to every 100 ms when it has been quiet (core wakeProbeDelayMs); a change
 * wakes the subscribers, whose claim then finds the new work. This connection's own commits do not
 * change it: local submits wake the local scheduler directly, and a completion here of a command
 * with dependants (the claim says which have them) wakes them through settled().
 */
/** Claimed commands with dependants remembered at most (see claimedWithDependants). */
const MAX_WITH_DEPENDANTS = 10_000;

export class SqliteWakeups implements WakeupChannel {
  readonly #listeners = new Set<() => void>();
  /** Commands with dependants claimed through this store, their outcomes not yet written (oldest first). */
  readonly #withDependants = new Set<string>();
  #timer: NodeJS.Timeout | null = null;
  #seen: number | null = null;
  #changedAt = 0;

  constructor(private readonly db: SqliteDatabase) {}

  async subscribe(onWake: () => void): Promise<() => Promise<void>> {
    this.#listeners.add(onWake);
    if (this.#listeners.size === 1) {
      this.#seen = this.#probe();
      this.#changedAt = performance.now();
      this.#schedule();
    }
    return async () => {
      this.#listeners.delete(onWake);
      if (this.#listeners.size === 0) this.close();
    };
  }

  /** Nothing to send: other connections see the commit itself. */
  notify(): void {}

  /** This store claimed `id`, a command with dependants. */
  claimedWithDependants(id: string): void {
    // An outcome written through another store never comes here: the oldest entries go.
    if (this.#withDependants.size >= MAX_WITH_DEPENDANTS) {
      this.#withDependants.delete(this.#withDependants.values().next().value!);
    }
    this.#withDependants.add(id);
  }

  /**
   * Outcomes of `ids` were written through this store, committed by now or, in a transaction
   * holding the write lock, before any claim reads again; `mayRelease`: SUCCESS or DEAD, which
   * release dependants (a DEAD one those waiting under onFailure 'continue'). When one of them
   * has dependants, this store's subscribers wake: its own commits do not change data_version, and
   * what they released would otherwise wait for the poll.
   */
  settled(ids: Iterable<string>, mayRelease: boolean): void {
    let had = false;
    for (const id of ids) had = this.#withDependants.delete(id) || had;
    if (had && mayRelease) for (const onWake of [...this.#listeners]) onWake();
  }

  /** Stops probing (the store is closing). */
  close(): void {
    this.#listeners.clear();
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #schedule(): void {
    this.#timer = setTimeout(() => this.#tick(), wakeProbeDelayMs(performance.now() - this.#changedAt));
    // An idle probe must not keep the process alive on its own.
    this.#timer.unref();
  }

  #tick(): void {
    this.#timer = null;
    if (this.#listeners.size === 0) return;
    const version = this.#probe();
    if (version !== null && this.#seen !== null && version !== this.#seen) {
      this.#changedAt = performance.now();
      for (const onWake of [...this.#listeners]) onWake();
    }
    if (version !== null) this.#seen = version;
    this.#schedule();
  }

  /** The file's data version, or null when the handle cannot answer (closed): the poll covers. */
  #probe(): number | null {
    try {
      return this.db.open ? Number(this.db.pragma('data_version', { simple: true })) : null;
    } catch {
      return null;
    }
  }
}
