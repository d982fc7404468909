import type { ClaimRef, CommandId, CommandStore, FailureOutcome } from '@asynccmd/core';
import { pause, type StoreOutage } from './store-outage.js';
import { outageDelayMs } from './wake-signal.js';

/** The write was given up (shutdown deadline during an outage): the lease will expire and the command run again. */
export const ABANDONED = 'abandoned';
export type WriteResult = boolean | typeof ABANDONED;

const MAX_COMPLETE_BATCH = 500;

/**
 * Records outcomes. A write that meets a lost connection is retried with backoff until it lands —
 * the caller keeps the lease alive meanwhile — so a database blip never re-runs a finished command.
 * Completions are coalesced: those that arrive in the same event-loop turn (a claimed batch that
 * finishes together) and those that arrive while a write is in flight go out in one `complete`
 * call, so a drain costs one complete statement per batch rather than per command.
 */
export class OutcomeWriter {
  readonly #giveUp = new AbortController();
  #pending: { ref: ClaimRef; resolve: (r: WriteResult) => void }[] = [];
  #flushing = false;
  #scheduled = false;

  constructor(
    private readonly store: CommandStore,
    private readonly outage: StoreOutage,
  ) {}

  /** True when the claim still held and the command is now SUCCESS; false when it was fenced out. */
  complete(ref: ClaimRef): Promise<WriteResult> {
    return new Promise((resolve) => {
      this.#pending.push({ ref, resolve });
      if (this.#flushing || this.#scheduled) return;
      // After the I/O and microtasks of this turn: the rest of a batch finishing together joins.
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        void this.#flush();
      });
    });
  }

  fail(ref: ClaimRef, outcome: FailureOutcome): Promise<WriteResult> {
    return this.#persist('fail', () => this.store.fail(ref, outcome));
  }

  /** Stops retrying writes that are failing (shutdown deadline): they resolve as ABANDONED. */
  giveUp(): void {
    this.#giveUp.abort();
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    try {
      while (this.#pending.length > 0) {
        const batch = this.#pending.splice(0, MAX_COMPLETE_BATCH);
        const ids = await this.#persist('complete', () => this.store.complete(batch.map((b) => b.ref)));
        const done = ids === ABANDONED ? null : new Set<CommandId>(ids);
        for (const b of batch) b.resolve(done === null ? ABANDONED : done.has(b.ref.id));
      }
    } finally {
      this.#flushing = false;
    }
  }

  async #persist<T>(operation: string, write: () => Promise<T>): Promise<T | typeof ABANDONED> {
    for (;;) {
      try {
        const result = await write();
        this.outage.succeeded(operation);
        return result;
      } catch (error) {
        const failures = this.outage.failed(operation, error);
        if (this.#giveUp.signal.aborted) return ABANDONED;
        await pause(outageDelayMs(failures), this.#giveUp.signal);
      }
    }
  }
}
