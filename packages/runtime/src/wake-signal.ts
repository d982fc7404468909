/** A sleep that ends early when someone calls `wake()`: the poll loop's pause between rounds. */
export class WakeSignal {
  #pending = false;
  #resolve: (() => void) | null = null;

  /** Wakes the current (or, if nobody is waiting, the next) `wait`. */
  wake(): void {
    if (this.#resolve) {
      const r = this.#resolve;
      this.#resolve = null;
      r();
    } else {
      this.#pending = true;
    }
  }

  /** Resolves after `ms`, or at once / as soon as `wake()` is called. */
  wait(ms: number): Promise<void> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        if (this.#resolve === done) this.#resolve = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#resolve = done;
    });
  }
}

/** Exponential pause for store outages: 100 ms doubling to `capMs`. */
export function outageDelayMs(failures: number, capMs = 5_000): number {
  return Math.min(capMs, 100 * 2 ** Math.max(0, failures - 1));
}
