import type {
  ClaimRef,
  CommandId,
  CommandStore,
  CompletedAttempt,
  FailedAttempt,
  FailureOutcome,
} from '@asynccmd/core';
import { outageDelayMs, pause, type StoreOutage } from './store-outage.js';

/** The write was given up (shutdown deadline during an outage): the lease will expire and the command run again. */
export const ABANDONED = 'abandoned';
export type WriteResult = boolean | typeof ABANDONED;

/** Outcomes written in one call at most. */
export const MAX_OUTCOME_BATCH = 500;

/**
 * Records outcomes. A write that meets a lost connection is retried with backoff until it lands —
 * the caller keeps the lease alive meanwhile — so a database blip never re-runs a finished command.
 * Outcomes are coalesced: those that arrive in the same event-loop turn (a claimed batch that
 * finishes together) and those that arrive while a write is in flight go out in one call, so a
 * drain costs one complete statement per batch rather than per command, and a batch that fails
 * together (a downstream outage) one fail call.
 */
export class OutcomeWriter {
  readonly #giveUp = new AbortController();
  readonly #completes: CoalescedWrites<CompletedAttempt>;
  readonly #fails: CoalescedWrites<FailedAttempt>;

  constructor(
    private readonly store: CommandStore,
    private readonly outage: StoreOutage,
  ) {
    this.#completes = new CoalescedWrites(
      (refs) => this.#persist('complete', () => store.complete(refs)),
      (ref) => ref.id,
    );
    this.#fails = new CoalescedWrites(
      (attempts) => this.#persist('fail', () => store.fail(attempts)),
      (attempt) => attempt.ref.id,
    );
  }

  /**
   * True when the claim still held and the command is now SUCCESS (with the attempt's result, if
   * any); false when it was fenced out.
   */
  complete(attempt: CompletedAttempt): Promise<WriteResult> {
    return this.#completes.add(attempt);
  }

  /** True when the claim still held and the outcome (PENDING for a retry, or DEAD) was written. */
  fail(ref: ClaimRef, outcome: FailureOutcome): Promise<WriteResult> {
    return this.#fails.add({ ref, outcome });
  }

  /** Stops retrying writes that are failing (shutdown deadline): they resolve as ABANDONED. */
  giveUp(): void {
    this.#giveUp.abort();
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

/**
 * Items written together: those added in one event-loop turn, and those added while a write is in
 * flight, go out in the next single call (at most MAX_OUTCOME_BATCH at a time). Each add resolves with
 * whether its command's id came back as written.
 */
class CoalescedWrites<T> {
  #pending: { item: T; resolve: (r: WriteResult) => void }[] = [];
  #flushing = false;
  #scheduled = false;

  constructor(
    private readonly write: (items: T[]) => Promise<readonly CommandId[] | typeof ABANDONED>,
    private readonly idOf: (item: T) => CommandId,
  ) {}

  add(item: T): Promise<WriteResult> {
    return new Promise((resolve) => {
      this.#pending.push({ item, resolve });
      if (!this.#flushing && !this.#scheduled) this.#schedule();
    });
  }

  /**
   * The next batch goes out after the I/O and microtasks of this turn: the rest of a batch
   * finishing together joins. Also between batches: a store that answers within microtasks (a
   * synchronous driver) would otherwise get a write for every few commands that finish meanwhile.
   */
  #schedule(): void {
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    try {
      const batch = this.#pending.splice(0, MAX_OUTCOME_BATCH);
      const ids = await this.write(batch.map((b) => b.item));
      const done = ids === ABANDONED ? null : new Set<CommandId>(ids);
      for (const b of batch) b.resolve(done === null ? ABANDONED : done.has(this.idOf(b.item)));
    } finally {
      this.#flushing = false;
      if (this.#pending.length > 0) this.#schedule();
    }
  }
}
