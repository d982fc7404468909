import { type WakeupChannel } from '@asynccmd/core';
import type { Pool } from 'mysql2/promise';
import { select } from './connection.js';
import { wakeProbeDelayMs } from '@asynccmd/core/store-kit';

/**
 * Wake-ups across processes without a broker. MySQL and MariaDB have no LISTEN/NOTIFY, so a probe
 * asks for the table's highest id — one primary-key index dive, answered without reading a row —
 * every 5 ms while it keeps changing, backing off to every 100 ms when quiet (core
 * wakeProbeDelayMs). A new highest id means another process committed a submit: the subscribers
 * wake and their claim finds it. A transaction that took a lower id but committed after a higher
 * one was seen does not move the highest id; the next submit or the poll interval picks it up.
 * Retries and reclaims made elsewhere are found by the poll, as before. A highest id this store
 * inserted itself wakes nobody: local submits wake the local scheduler directly.
 *
 * While the latest claim of every type list this store claims for came back full, the probe skips
 * its query: a scheduler whose claims fill claims again as soon as it has room, so a wake-up would
 * tell it nothing, and a backlog drain would otherwise pay a probe every few milliseconds in each
 * process. A claim that comes back short (the scheduler may now sleep) lets the probe run again.
 */
export class MysqlWakeups implements WakeupChannel {
  readonly #listeners = new Set<() => void>();
  #timer: NodeJS.Timeout | null = null;
  #seen: string | null = null;
  #changedAt = 0;
  #closed = false;
  /** The last id this store inserted (its own submits are not news). */
  #ownLast: string | null = null;
  /** Whether the latest claim of each type list (joined) came back full. */
  readonly #lastClaimFull = new Map<string, boolean>();
  /** Type lists whose latest claim came back short. */
  #shortClaims = 0;

  readonly #probeSql: string;

  constructor(
    private readonly pool: Pool,
    /** The command table (a validated identifier). */
    table: string,
  ) {
    this.#probeSql = `SELECT MAX(id) AS id FROM \`${table}\``;
  }

  async subscribe(onWake: () => void): Promise<() => Promise<void>> {
    this.#listeners.add(onWake);
    if (this.#listeners.size === 1 && this.#timer === null) {
      this.#changedAt = performance.now();
      this.#seen = null;
      this.#schedule(0);
    }
    return async () => {
      this.#listeners.delete(onWake);
      if (this.#listeners.size === 0) this.#stop();
    };
  }

  /** This store inserted up to `id` (committed or not): a probe seeing it as the highest stays quiet. */
  insertedHere(id: string | null): void {
    if (id !== null) this.#ownLast = id;
  }

  /** A claim of `types` asked for `limit` rows and got `got`. */
  claimed(types: readonly string[], limit: number, got: number): void {
    const key = types.join('\u0000');
    const full = limit > 0 && got >= limit;
    const was = this.#lastClaimFull.get(key);
    if (was === full) return;
    this.#lastClaimFull.set(key, full);
    if (was === false) this.#shortClaims--;
    if (!full) this.#shortClaims++;
  }

  /** Nothing to send: other processes' probes see the commit itself. */
  notify(): void {}

  /**
   * A transition this store committed released dependants: its own subscribers wake at once. The
   * probe sees submits only (a release moves no highest id): other processes find them at their poll.
   */
  released(count: number): void {
    if (count > 0 && !this.#closed) for (const onWake of [...this.#listeners]) onWake();
  }

  /** Stops probing for good (the store is closing). */
  close(): void {
    this.#closed = true;
    this.#listeners.clear();
    this.#stop();
  }

  #stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #schedule(delayMs: number): void {
    this.#timer = setTimeout(() => void this.#tick(), delayMs);
    // An idle probe must not keep the process alive on its own.
    this.#timer.unref();
  }

  async #tick(): Promise<void> {
    if (this.#shortClaims === 0 && this.#lastClaimFull.size > 0) {
      // Every claimer here is draining a backlog: look again later (see the class comment).
      this.#schedule(wakeProbeDelayMs(performance.now() - this.#changedAt));
      return;
    }
    let highest: string | null = null;
    try {
      const [row] = await select<{ id: unknown }>(this.pool, this.#probeSql);
      highest = String(row?.id ?? '');
    } catch {
      // Unreachable for now: the scheduler's polls report outages; probing goes on, slowly.
      this.#changedAt = -Infinity;
    }
    this.#timer = null;
    if (this.#closed || this.#listeners.size === 0) return;
    if (highest !== null) {
      if (this.#seen !== null && highest !== this.#seen) {
        this.#changedAt = performance.now();
        if (highest !== this.#ownLast) for (const onWake of [...this.#listeners]) onWake();
      }
      this.#seen = highest;
    }
    this.#schedule(wakeProbeDelayMs(performance.now() - this.#changedAt));
  }
}
