import type { ClaimRef, CommandStore, RevokedClaim } from '@asynccmd/core';
import type { StoreOutage } from '../store-outage.js';
import { PeriodicService, type RunOutcome } from './periodic-service.js';

/** How a claim was found taken away: by a heartbeat, or by the store's word of a requeue or kill. */
export type LossNotice = 'heartbeat' | RevokedClaim['by'];

/** A claim whose lease this instance keeps alive. */
export interface HeldLease {
  readonly ref: ClaimRef;
  readonly leaseMs: number;
  /**
   * When (performance.now()) the statement that last set the lease was sent — the claim, then each
   * heartbeat that found it held: the lease runs for `leaseMs` from no earlier than that.
   */
  renewedAt: number;
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
export class LeaseKeeper extends PeriodicService {
  readonly #held = new Set<HeldLease>();
  #unsubscribe: Promise<(() => Promise<void>) | null> | null = null;
  /** A heartbeat asked for out of turn (renewNow), while it runs. */
  #renewing: Promise<boolean> | null = null;

  constructor(
    private readonly store: CommandStore,
    private readonly outage: StoreOutage,
    readonly intervalMs: number,
  ) {
    // A failed heartbeat is tried again within the period (100 ms doubling), never later: every
    // missed one brings each lease closer to lapsing.
    super(
      {
        operation: 'heartbeat',
        intervalMs,
        runOnStart: false,
        maxOutageDelayMs: intervalMs,
        retrySooner: true,
      },
      outage,
    );
  }

  /**
   * Whether `lease` may lapse before the next heartbeat lands: less than a heartbeat period (or a
   * quarter of the lease, if that is shorter) is left of it, counted from when the statement that
   * set it was sent. A claim must not start then: another instance may reclaim it while it runs.
   */
  mayLapse(lease: HeldLease, now: number): boolean {
    return lease.renewedAt + lease.leaseMs - now < Math.min(this.intervalMs, lease.leaseMs / 4);
  }

  /**
   * One heartbeat for every held claim now, out of turn (callers at the same moment share it).
   * Resolves true when it ran (claims found taken away have been told), false when the store failed.
   */
  renewNow(): Promise<boolean> {
    this.#renewing ??= this.runOnce().then((outcome) => {
      this.#renewing = null;
      return outcome !== 'failed';
    });
    return this.#renewing;
  }

  /** Starts keeping `lease` alive until `release(lease)` (once its outcome is recorded). */
  hold(lease: HeldLease): void {
    this.#held.add(lease);
  }

  /** Stops keeping `lease` alive. */
  release(lease: HeldLease): void {
    this.#held.delete(lease);
  }

  get size(): number {
    return this.#held.size;
  }

  protected override onStart(): void {
    const revocations = this.store.revocations;
    if (!revocations) return;
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

  protected override async onStop(): Promise<void> {
    const unsubscribe = await this.#unsubscribe;
    this.#unsubscribe = null;
    await unsubscribe?.().catch(() => undefined);
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
    await this.runOnce();
  }

  /**
   * One `store.heartbeat` per distinct lease length. Every group is tried; a failure of any is the
   * run's (the claims of a failed group are kept, and renewed at the next tick).
   */
  protected async work(): Promise<RunOutcome> {
    if (this.#held.size === 0) return 'idle';
    const byLease = new Map<number, HeldLease[]>();
    for (const lease of this.#held) {
      const group = byLease.get(lease.leaseMs);
      if (group) group.push(lease);
      else byLease.set(lease.leaseMs, [lease]);
    }
    let failure: { error: unknown } | null = null;
    for (const [leaseMs, leases] of byLease) {
      let alive: ClaimRef[];
      const sentAt = performance.now();
      try {
        alive = await this.store.heartbeat(
          leases.map((l) => l.ref),
          leaseMs,
        );
      } catch (error) {
        failure ??= { error };
        continue;
      }
      const kept = new Set(alive.map((r) => `${r.id}:${r.token}`));
      for (const lease of leases) {
        if (kept.has(`${lease.ref.id}:${lease.ref.token}`)) lease.renewedAt = sentAt;
        else if (this.#held.has(lease)) {
          this.#held.delete(lease);
          lease.lost('heartbeat');
        }
      }
    }
    if (failure) throw failure.error;
    return 'done';
  }
}
