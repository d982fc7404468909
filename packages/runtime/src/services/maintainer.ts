import type { LeaseKeeper } from './lease-keeper.js';
import type { PeriodicService } from './periodic-service.js';

/**
 * Starts and stops the runtime's background services. Stopping comes in two steps, because the
 * services serve different things: the upkeep of the table (the hung reclaimer, retention) stops
 * with claiming, while the lease keeper goes on until no command of this instance runs any more —
 * their leases must be renewed until their outcomes are written.
 */
export class Maintainer {
  readonly #upkeep: readonly PeriodicService[];

  constructor(
    readonly leases: LeaseKeeper,
    upkeep: readonly (PeriodicService | null)[],
  ) {
    this.#upkeep = upkeep.filter((service): service is PeriodicService => service !== null);
  }

  start(): void {
    this.leases.start();
    for (const service of this.#upkeep) service.start();
  }

  /** Stops the table's upkeep (a run in flight stops where it can, and is waited for). */
  async stopUpkeep(): Promise<void> {
    await Promise.all(this.#upkeep.map((service) => service.stop()));
  }

  /** Stops every service; once it resolves, none has a timer or a run left. */
  async stop(): Promise<void> {
    await this.stopUpkeep();
    await this.leases.stop();
  }
}
