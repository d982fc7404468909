import type { CommandStore } from '@asynccmd/core';
import type { CommandEvents } from '../command-events.js';
import type { StoreOutage } from '../store-outage.js';
import { outageDelayMs } from '../wake-signal.js';

export interface HungReclaimerOptions {
  readonly intervalMs: number;
  readonly batchSize: number;
  readonly maxRescues: number;
}

/**
 * Puts RUNNING commands whose lease has lapsed on the database clock (their instance died) back to
 * PENDING, or DEAD past `maxRescues`. It runs on its own timer — at start, then every `intervalMs`
 * — never inside a claim round, so claiming (and a woken round's latency) never waits for it.
 * A store failure is reported and retried with backoff.
 */
export class HungReclaimer {
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #stopped = true;
  #failures = 0;

  constructor(
    private readonly store: CommandStore,
    private readonly events: CommandEvents,
    private readonly outage: StoreOutage,
    readonly options: HungReclaimerOptions,
    /** Called when some were reclaimed; `due` of them are PENDING again and can be claimed now. */
    private readonly onReclaimed: (reclaimed: number, due: number) => void,
  ) {}

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#schedule(0);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
  }

  /** One look for hung commands. Never rejects; returns how many were reclaimed. */
  async reclaim(): Promise<number> {
    try {
      const reclaimed = await this.store.reclaimHung({
        limit: this.options.batchSize,
        maxRescues: this.options.maxRescues,
      });
      this.outage.succeeded('reclaim');
      this.#failures = 0;
      let due = 0;
      for (const r of reclaimed) {
        if (r.status !== 'DEAD') due++;
        this.events.emit({ kind: 'reclaimed', id: r.id, type: r.type, dead: r.status === 'DEAD' });
      }
      if (reclaimed.length > 0) this.onReclaimed(reclaimed.length, due);
      return reclaimed.length;
    } catch (error) {
      this.#failures = this.outage.failed('reclaim', error);
      return 0;
    }
  }

  #schedule(delayMs: number): void {
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#running = this.reclaim().then((count) => {
        this.#running = null;
        if (this.#stopped) return;
        // A full batch: probably more hung ones, look again at once; an outage: back off.
        const { intervalMs, batchSize } = this.options;
        const next =
          this.#failures > 0
            ? Math.max(intervalMs, outageDelayMs(this.#failures, Math.max(intervalMs, 5_000)))
            : count >= batchSize
              ? 0
              : intervalMs;
        this.#schedule(next);
      });
    }, delayMs);
    this.#timer.unref();
  }
}
