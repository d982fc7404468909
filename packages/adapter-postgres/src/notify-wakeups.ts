import { randomUUID } from 'node:crypto';
import type { Logger, RevokedClaim, WakeupChannel } from '@asynccmd/core';
import { REVOKED_PAYLOAD } from './sql.js';

export interface NotifyWakeupsOptions {
  readonly channel: string;
  /** At most one NOTIFY per window per process. */
  readonly windowMs: number;
  readonly logger: Logger;
  /** Sends `SELECT pg_notify(channel, payload)` outside any transaction. */
  readonly send: (channel: string, payload: string) => Promise<unknown>;
}

/**
 * Wake-ups over LISTEN/NOTIFY, whatever the connection that listens (pg's dedicated LISTEN
 * connection in wakeups.ts, PGlite's own listeners in @asynccmd/adapter-pglite).
 *
 * notify() is coalesced: the first call of a quiet period sends at once (low rates keep
 * millisecond latency), calls within the next window are folded into one NOTIFY at its end (high
 * rates cost one NOTIFY per window, not one per submit). It is never sent inside a submit
 * transaction: a NOTIFY takes a global lock at commit and would serialise concurrent commits.
 * notify() also wakes this store's own subscribers directly, and its NOTIFY carries a payload of
 * this store's own, which `heard` ignores when it comes back (the wake-up it stands for was given
 * already).
 *
 * The same channel carries the claims admin requeues and kills take away from running commands
 * (sent by those statements themselves, so they arrive as the write commits; sql.ts
 * REVOKED_PAYLOAD): subscribeRevocations() hears them.
 */
export abstract class NotifyWakeups implements WakeupChannel {
  protected readonly subscribers = new Set<() => void>();
  protected readonly revocationSubscribers = new Set<(revoked: RevokedClaim) => void>();
  protected windowTimer: NodeJS.Timeout | null = null;
  private notifyPending = false;
  protected closed = false;
  /** The payload of the NOTIFYs notify() sends, so that `heard` knows them for its own. */
  private readonly ownPayload = `wake ${randomUUID()}`;

  constructor(protected readonly options: NotifyWakeupsOptions) {}

  /** Whether subscribers can be woken at all. */
  abstract get delivers(): boolean;
  /** Starts hearing the channel (calling `heard`), unless it already does. */
  protected abstract startListening(): Promise<void>;
  /** Stops hearing it. */
  protected abstract stopListening(): Promise<void>;

  subscribe(onWake: () => void): Promise<() => Promise<void>> {
    return this.listen(this.subscribers, onWake);
  }

  /** Hears the claims requeues and kills take away, for as long as the returned function is not called. */
  subscribeRevocations(onRevoked: (revoked: RevokedClaim) => void): Promise<() => Promise<void>> {
    return this.listen(this.revocationSubscribers, onRevoked);
  }

  private async listen<T>(into: Set<T>, subscriber: T): Promise<() => Promise<void>> {
    if (this.closed) throw new Error('the PostgreSQL store is closed');
    // Nothing to listen on: subscribed to nothing, nothing to undo.
    if (!this.delivers) return () => Promise.resolve();
    into.add(subscriber);
    await this.startListening();
    let active = true;
    return async () => {
      if (!active) return;
      active = false;
      into.delete(subscriber);
      if (!this.wanted()) await this.stopListening();
    };
  }

  /** Someone listens: the channel is to be heard. */
  protected wanted(): boolean {
    return this.subscribers.size > 0 || this.revocationSubscribers.size > 0;
  }

  /**
   * Announces committed work: to this store's own subscribers at once, and to others by a NOTIFY,
   * which `heard` ignores when it comes back: heard again a round trip later, it would wake the
   * subscribers a second time, typically while the claim that the first wake-up started is running
   * or just done, for a round that finds nothing new.
   */
  notify(): void {
    this.wake();
    this.sendSoon();
  }

  /** The NOTIFY of notify(), now or folded into the one at the end of the open window. */
  protected sendSoon(): void {
    if (this.takeWindow()) void this.send();
  }

  /**
   * True when a NOTIFY is to be sent now: no window is open, so this one opens it. Otherwise the
   * announcement is folded into the one sent when the open window ends.
   */
  private takeWindow(): boolean {
    if (this.closed) return false;
    if (this.windowTimer !== null) {
      this.notifyPending = true;
      return false;
    }
    this.openWindow();
    return true;
  }

  protected openWindow(): void {
    this.windowTimer = setTimeout(() => {
      this.windowTimer = null;
      if (this.notifyPending) {
        this.notifyPending = false;
        this.sendSoon();
      }
    }, this.options.windowMs);
    this.windowTimer.unref();
  }

  /**
   * Stops. A NOTIFY still folded into the open window goes out now, before the connection ends: a
   * process that submits and then stops (a script, a request handler's short-lived store) would
   * otherwise leave the listeners to find its last commands at their next poll.
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.windowTimer !== null) clearTimeout(this.windowTimer);
    this.windowTimer = null;
    const last = this.notifyPending ? this.send() : undefined;
    this.notifyPending = false;
    this.subscribers.clear();
    this.revocationSubscribers.clear();
    await Promise.all([last, this.stopListening()]);
  }

  /** Sends one NOTIFY; settles when it has gone out or failed (never rejects). */
  private send(): Promise<void> {
    return this.options.send(this.options.channel, this.ownPayload).then(
      () => undefined,
      (err: unknown) => {
        // Harmless: listeners fall back to polling.
        this.options.logger.warn({ err }, 'asynccmd: PostgreSQL NOTIFY failed');
      },
    );
  }

  /** A notification on the channel: a revocation, this store's own NOTIFY, or work to wake for. */
  protected heard(payload: string): void {
    if (payload === this.ownPayload) return;
    const revoked = REVOKED_PAYLOAD.exec(payload);
    if (revoked) return this.revoked(revoked);
    this.wokenByNotification();
    this.wake();
  }

  /** Called as a notification of work arrives, before the subscribers are woken. */
  protected wokenByNotification(): void {}

  protected wake(): void {
    this.tell(this.subscribers, undefined);
  }

  private revoked([, by, id, token]: RegExpExecArray): void {
    const revoked: RevokedClaim = { ref: { id: id!, token: token! }, by: by as RevokedClaim['by'] };
    this.tell(this.revocationSubscribers, revoked);
  }

  private tell<T>(subscribers: ReadonlySet<(message: T) => void>, message: T): void {
    for (const subscriber of [...subscribers]) {
      try {
        subscriber(message);
      } catch (err) {
        this.options.logger.error({ err }, 'asynccmd: wake-up subscriber threw');
      }
    }
  }
}
