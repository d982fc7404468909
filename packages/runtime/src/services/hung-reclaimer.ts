import type { CommandStore } from '@asynccmd/core';
import type { CommandEvents } from '../command-events.js';
import type { StoreOutage } from '../store-outage.js';
import { PeriodicService, type RunOutcome } from './periodic-service.js';

export interface HungReclaimerOptions {
  readonly intervalMs: number;
  readonly batchSize: number;
  readonly maxRescues: number;
}

/**
 * Puts RUNNING commands whose lease has lapsed on the database clock (their instance died) back to
 * PENDING, or DEAD past `maxRescues`. It runs on its own timer — at start, then every `intervalMs`
 * — never inside a claim round, so claiming (and a woken round's latency) never waits for it.
 * A full batch means more are probably hung: it looks again at once. A store failure is reported
 * and retried with backoff.
 */
export class HungReclaimer extends PeriodicService {
  constructor(
    private readonly store: CommandStore,
    private readonly events: CommandEvents,
    outage: StoreOutage,
    readonly options: HungReclaimerOptions,
    /** Called when some were reclaimed; `due` of them are PENDING again and can be claimed now. */
    private readonly onReclaimed: (reclaimed: number, due: number) => void,
  ) {
    super(
      {
        operation: 'reclaim',
        intervalMs: options.intervalMs,
        runOnStart: true,
        maxOutageDelayMs: Math.max(options.intervalMs, 5_000),
      },
      outage,
    );
  }

  protected async work(): Promise<RunOutcome> {
    const reclaimed = await this.store.reclaimHung({
      limit: this.options.batchSize,
      maxRescues: this.options.maxRescues,
    });
    let due = 0;
    for (const r of reclaimed) {
      if (r.status !== 'DEAD') due++;
      this.events.emit({ kind: 'reclaimed', id: r.id, type: r.type, dead: r.status === 'DEAD' });
    }
    if (reclaimed.length > 0) this.onReclaimed(reclaimed.length, due);
    return reclaimed.length >= this.options.batchSize ? 'more' : 'done';
  }
}
