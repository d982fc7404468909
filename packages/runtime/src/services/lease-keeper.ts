import type { ClaimRef, CommandStore, RevokedClaim } from '@asynccmd/core';
import type { StoreOutage } from '../store-outage.js';

/** How a claim was found taken away: by a heartbeat, or by the store's word of a requeue or kill. */
export type LossNotice = 'heartbeat' | RevokedClaim['by'];

/** A claim whose lease this instance keeps alive. */
export interface HeldLease {
  readonly ref: ClaimRef;
  readonly leaseMs: number;
  /** Called once when the claim is found taken away (reclaimed, requeued, killed). */
  lost(notice: LossNotice): void;
}

/**
 * Keeps the leases of every claim this instance holds (running or waiting in a pool queue) alive:
 * one `store.heartbeat` per interval for all of them (one per distinct lease length), so a short
 * lease gives fast recovery from dead instances without ever reclaiming a live command. A heartbeat
 * also finds claims taken away; where the store has `revocations`, a requeue or kill is heard the
 * moment it commits instead.
 */
export class LeaseKeeper {
  readonly #held = new Set<HeldLease>();
  #timer: NodeJS.Timeout | null = null;
  #beating: Promise<void> | null = null;
  #unsubscribe: Promise<(() => Promise<void>) | null> | null = null;

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
    const revocations = this.store.revocations;
    if (revocations) {
      this.#unsubscribe = revocations
        .subscribe((revoked) => this.revoked(revoked))
        .then(
          (unsubscribe) => unsubscribe,
          (error: unknown) => {
            // The heartbeats still find the claims taken away.
            this.outage.failed('revocations', error);
            return null;
          },
        );
    }
    this.#timer = setInterval(() => {
      // A slow database must not pile heartbeats up: skip the tick while one is in flight.
      if (!this.#beating) this.#beating = this.beat().finally(() => (this.#beating = null));
    }, this.intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    const unsubscribe = await this.#unsubscribe;
    this.#unsubscribe = null;
    await unsubscribe?.().catch(() => undefined);
    await this.#beating;
  }

  /**
   * Resolves once the store's revocations are being heard (true), or when the store has none or
   * they could not be subscribed to (false: the heartbeats alone find claims taken away).
   */
  get hearingRevocations(): Promise<boolean> {
    return this.#unsubscribe?.then((u) => u !== null) ?? Promise.resolve(false);
  }

  /** The store says `revoked`'s claim was taken away: its holder here hears it now. */
  revoked({ ref, by }: RevokedClaim): void {
    for (const lease of this.#held) {
      if (lease.ref.id !== ref.id || lease.ref.token !== ref.token) continue;
      this.#held.delete(lease);
      lease.lost(by);
    }
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
        lease.lost('heartbeat');
      }
    }
  }
}
