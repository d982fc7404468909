import { AsyncResource } from 'node:async_hooks';
import type { ClaimRef, CommandProgress, CommandStore, Logger } from '@asynccmd/core';

/** At most one progress write per claim in this many milliseconds: the latest report wins. */
export const PROGRESS_WRITE_INTERVAL_MS = 1_000;

/** A claim whose executor reports progress. */
export interface ProgressClaim {
  readonly ref: ClaimRef;
}

/**
 * Writes what executors report with `ctx.progress`, throttled: a claim's first report goes out at
 * once (in the next turn, with the others of that turn), later ones at most once a second per
 * claim, only the latest of each; reports of many claims due together go out in one
 * `store.reportProgress`. The store writes a report only while its claim holds the command, so a
 * stale attempt's progress is never written. `settle` writes a claim's report not yet written
 * before its outcome. Progress is advice: a write that fails is tried again with the next one, and
 * never fails a command.
 */
export class ProgressWriter {
  /** The latest report of each claim not written yet. */
  readonly #unwritten = new Map<ProgressClaim, CommandProgress>();
  /** When (performance.now()) each claim's progress was last sent. */
  readonly #sentAt = new WeakMap<ProgressClaim, number>();
  /** The write in flight, and the claims it carries. */
  #inFlight: { readonly claims: ReadonlySet<ProgressClaim>; readonly done: Promise<void> } | null = null;
  #timer: NodeJS.Timeout | null = null;
  /**
   * The timer's callback, bound to where this writer was made: a timer set from inside an
   * executor's transaction would otherwise carry that transaction's async context into the write.
   */
  readonly #flushLater = AsyncResource.bind(() => {
    this.#timer = null;
    void this.#flush();
  });

  constructor(
    private readonly store: CommandStore,
    private readonly logger: Logger,
    private readonly intervalMs = PROGRESS_WRITE_INTERVAL_MS,
  ) {}

  /** Takes `progress` (checked) as `claim`'s latest; it is written within the interval. */
  report(claim: ProgressClaim, progress: CommandProgress): void {
    this.#unwritten.set(claim, progress);
    this.#schedule();
  }

  /** Whether `claim` has progress not written yet, or being written. */
  holds(claim: ProgressClaim): boolean {
    return this.#unwritten.has(claim) || this.#inFlight?.claims.has(claim) === true;
  }

  /**
   * Writes `claim`'s report not written yet, now (before its outcome is). With `afterInFlight`, a
   * write of its carried by a flush under way lands first, so the last report is the one stored;
   * without, it does not wait for that flush (which may itself be waiting for the transaction the
   * caller is in: SQLite's one writer). Never rejects.
   */
  async settle(claim: ProgressClaim, afterInFlight = true): Promise<void> {
    const inFlight = this.#inFlight;
    if (afterInFlight && inFlight !== null && inFlight.claims.has(claim)) await inFlight.done;
    const progress = this.#unwritten.get(claim);
    if (progress === undefined) return;
    this.#unwritten.delete(claim);
    await this.#write([[claim, progress]]);
  }

  /** Drops what `claim` reported and has not been written: its attempt is over. */
  forget(claim: ProgressClaim): void {
    this.#unwritten.delete(claim);
  }

  #schedule(): void {
    if (this.#timer !== null || this.#inFlight !== null || this.#unwritten.size === 0) return;
    const now = performance.now();
    let due = Number.POSITIVE_INFINITY;
    for (const claim of this.#unwritten.keys()) {
      due = Math.min(due, (this.#sentAt.get(claim) ?? Number.NEGATIVE_INFINITY) + this.intervalMs);
    }
    this.#timer = setTimeout(this.#flushLater, Math.max(0, due - now));
    this.#timer.unref();
  }

  async #flush(): Promise<void> {
    const now = performance.now();
    const due: [ProgressClaim, CommandProgress][] = [];
    for (const [claim, progress] of this.#unwritten) {
      if ((this.#sentAt.get(claim) ?? Number.NEGATIVE_INFINITY) + this.intervalMs <= now) {
        due.push([claim, progress]);
      }
    }
    for (const [claim] of due) this.#unwritten.delete(claim);
    if (due.length > 0) {
      const done = this.#write(due);
      this.#inFlight = { claims: new Set(due.map(([claim]) => claim)), done };
      await done;
      this.#inFlight = null;
    }
    this.#schedule();
  }

  async #write(reports: readonly (readonly [ProgressClaim, CommandProgress])[]): Promise<void> {
    const sentAt = performance.now();
    for (const [claim] of reports) this.#sentAt.set(claim, sentAt);
    try {
      await this.store.reportProgress(reports.map(([claim, p]) => ({ ...claim.ref, ...p })));
    } catch (err) {
      this.logger.debug(
        { err, reports: reports.length },
        'asynccmd: a progress write failed; the next report writes again',
      );
    }
  }
}
