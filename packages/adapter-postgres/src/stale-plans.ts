/*
 * Cached plans made while the command table was small.
 *
 * The hot path's statements are prepared once per connection, and PostgreSQL keeps a generic plan
 * for each once a few executions have run. A plan made while the table held a handful of rows
 * (a new deployment, a queue that was idle when it was analyzed) reads the table sequentially: the
 * cheapest way to read one page. It stays cached as the table grows, until the table is analyzed
 * again; by then a fenced write of a few hundred rows scans the whole table for them, and the
 * drain falls behind, which makes the table, and each scan, larger still (measured on a fresh table
 * under 6,500 submits/s: a completion 0.5 s after 10 s, 18.8 s after 60 s, until autovacuum's
 * ANALYZE).
 *
 * Fenced writes reach their rows by primary key whatever the table's size (a few hundredths of a
 * millisecond per row), so one that takes much longer than that points at such a plan. The watch
 * then has the table analyzed: the new statistics invalidate every session's cached plans for it,
 * and the next executions plan again from its present size. At most once a minute per store;
 * where the store's role does not own the table, the server skips the ANALYZE with a warning and
 * autovacuum's does the same later.
 */

export interface StalePlanSettings {
  /** A fenced write slower than this (ms), plus `perRowMs` per row it names, points at a stale plan. */
  readonly slowMs: number;
  readonly perRowMs: number;
  /** At most one ANALYZE this often (ms) per store. */
  readonly everyMs: number;
}

const STALE_PLAN_DEFAULTS: StalePlanSettings = { slowMs: 50, perRowMs: 0.2, everyMs: 60_000 };

/** Times fenced writes and has the table analyzed when one was slow (see above). */
export class StalePlanWatch {
  #lastAt = Number.NEGATIVE_INFINITY;
  #analyzing = false;

  constructor(
    /** Analyzes the command table; its failure goes to `report.failed`. */
    private readonly analyze: () => Promise<void>,
    private readonly report: {
      readonly analyzing: (ms: number, rows: number) => void;
      readonly failed: (error: unknown) => void;
    },
    private readonly settings: StalePlanSettings = STALE_PLAN_DEFAULTS,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** Runs `write`, a fenced write naming `rows` rows, and watches how long it took. */
  async timed<T>(rows: number, write: () => Promise<T>): Promise<T> {
    const began = this.clock();
    const result = await write();
    this.took(this.clock() - began, rows);
    return result;
  }

  /** A fenced write of `rows` rows took `ms`. */
  took(ms: number, rows: number): void {
    if (ms <= this.settings.slowMs + this.settings.perRowMs * rows) return;
    const now = this.clock();
    if (this.#analyzing || now - this.#lastAt < this.settings.everyMs) return;
    this.#lastAt = now;
    this.#analyzing = true;
    this.report.analyzing(ms, rows);
    void this.analyze()
      .catch((error: unknown) => this.report.failed(error))
      .finally(() => {
        this.#analyzing = false;
      });
  }
}
