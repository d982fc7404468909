/**
 * Why the poll loop runs a round: `poll` (the interval passed), `work` (a local submit or a store
 * wake-up announced new commands) — both claim whatever is free — or `refill` (a busy pool freed
 * enough room, or the last round came back full): only pools known to have work waiting, and only
 * once their free room reaches `refillAt`.
 */
export type WakeReason = 'poll' | 'work' | 'refill';

/** A sleep that ends early when someone calls `wake()`: the poll loop's pause between rounds. */
export class WakeSignal {
  #pending: WakeReason | null = null;
  #resolve: ((reason: WakeReason) => void) | null = null;

  /**
   * Wakes the current `wait` or, if nobody is waiting (a round is running), makes the next one
   * return at once: a wake-up is never lost. `work` outranks `refill`.
   */
  wake(reason: 'work' | 'refill' = 'work'): void {
    if (this.#resolve) {
      const r = this.#resolve;
      this.#resolve = null;
      r(reason);
    } else if (this.#pending !== 'work') {
      this.#pending = reason;
    }
  }

  /** The wake-up that arrived since the last wait, consumed; null when none did. */
  take(): WakeReason | null {
    const pending = this.#pending;
    this.#pending = null;
    return pending;
  }

  /** Resolves after `ms` with `poll`, or at once / as soon as `wake()` is called with its reason. */
  wait(ms: number): Promise<WakeReason> {
    const pending = this.take();
    if (pending) return Promise.resolve(pending);
    return new Promise((resolve) => {
      const done = (reason: WakeReason): void => {
        clearTimeout(timer);
        if (this.#resolve === done) this.#resolve = null;
        resolve(reason);
      };
      const timer = setTimeout(() => done('poll'), ms);
      this.#resolve = done;
    });
  }
}
