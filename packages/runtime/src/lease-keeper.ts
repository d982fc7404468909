import type { ClaimRef, CommandStore } from '@asynccmd/core';
import type { StoreOutage } from './store-outage.js';

/** A claim whose lease this instance keeps alive. */
export interface HeldLease {
  readonly ref: ClaimRef;
  readonly leaseMs: number;
  /** Called once if a heartbeat finds the claim taken away (reclaimed, requeued, killed). */
  lost(): void;
}

/**
 * Keeps the leases of every claim this instance holds (running or waiting in a pool queue) alive:
 * one `store.heartbeat` per interval for all of them (one per distinct lease length), so a short
 * lease gives fast recovery from dead instances without ever reclaiming a live command.
 */
export class LeaseKeeper {
  readonly #held = new Set<HeldLease>();
  #timer: NodeJS.Timeout | null = null;
  #beating: Promise<void> | null = null;

  constructor(
    private readonly store: CommandStore,
    private readonly outage: StoreOutage,
    readonly intervalMs: number,
  ) {}

  /** Starts keeping `lease` alive; call the returned function once its outcome is recorded. */
  hold(lease: HeldLease): () => void {
    this.#held.add(lease);
    return () => {
      this.#held.delete(lease);
    };
  }

  get size(): number {
    return this.#held.size;
  }

  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => {
      // A slow database must not pile heartbeats up: skip the tick while one is in flight.
      if (!this.#beating) this.#beating = this.beat().finally(() => (this.#beating = null));
    }, this.intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#beating;
  }

  /** One heartbeat for every held claim. Never rejects: an outage is reported and retried next tick. */
  async beat(): Promise<void> {
    const byLease = new Map<number, HeldLease[]>();
    for (const lease of this.#held) {
      const group = byLease.get(lease.leaseMs);
      if (group) group.push(lease);
      else byLease.set(lease.leaseMs, [lease]);
    }
    for (const [leaseMs, leases] of byLease) {
      let alive: ClaimRef[];
      try {
        alive = await this.store.heartbeat(
          leases.map((l) => l.ref),
          leaseMs,
        );
        this.outage.succeeded('heartbeat');
      } catch (error) {
        this.outage.failed('heartbeat', error);
        continue;
      }
      const kept = new Set(alive.map((r) => `${r.id}:${r.token}`));
      for (const lease of leases) {
        if (kept.has(`${lease.ref.id}:${lease.ref.token}`) || !this.#held.has(lease)) continue;
        this.#held.delete(lease);
        lease.lost();
      }
    }
  }
}
