import type { ClaimedCommand } from '../command.js';
import { InvalidArgumentError } from '../errors.js';
import { requireInt } from '../input-checks.js';

/*
 * Claims that start past a slow head.
 *
 * A claim reads the claim index (priority, due time, id) of PENDING rows from its head. Every
 * command it claims leaves an entry there for a row version that is no longer PENDING; PostgreSQL's
 * vacuum and InnoDB's purge remove those, but not while some snapshot older than them is still held
 * (an analytics query, a forgotten open transaction: the cleanup horizon is pinned). Until then
 * each claim reads and skips every one of them, and they pile up at the head at the drain's rate:
 * the claim grows slower with each second of the hold, and the drain falls behind.
 *
 * So when a claim from the head is slow, the next claims of the same types start at the position
 * of the last row claimed, less a second of due time (a start key of the index: nothing before it
 * is read). What lies before that position was claimed, taken by another claimer, or not
 * claimable then; what can still appear there is a command committed after the claims passed its
 * position — a higher priority, or a due time more than a second older than its commit (a submit's
 * due time is its transaction's start: the second covers the usual commits) — and a claim another
 * claimer rolled back. A claim from the head every `headEveryMs` finds those, so they wait at
 * most that long, and only while claims from the head are slow: the first one that is fast again
 * ends the skipping. A claim from the head that takes longer than a twentieth of `headEveryMs`
 * spaces the next one out to twenty times its own length, so reading the dead head never takes
 * more than about 5 % of the claimer's time.
 *
 * InnoDB (MySQL, MariaDB) needs another answer to the same signal: its range scans do not stop at
 * the end of their range while the entries after it are delete-marked, and under READ COMMITTED a
 * locking read looks every one of them up in the primary key. So a start key only moves the cost
 * (a claim that takes every due row runs on through the dead entries of claimed rows past its
 * range). While skipping, the MySQL store reads its candidates without locks (a consistent read
 * passes dead entries cheaply) and then locks them by primary key; the position is not used there.
 *
 * The reclaim of lapsed leases reads lease_idx from its oldest lease, and the entries heartbeats
 * and completions leave there pile up the same way. ReclaimWindow does for it what HeadSkip does
 * for the claim: while a full scan is slow, the next ones read only the leases that lapsed since
 * the scan before (with a margin), and a full scan, spaced out the same way, finds the rest — a
 * lapsed claim that was locked when a windowed scan passed it, or one committed very late.
 */

/** A claim from the head (or a full reclaim scan) is spaced out to this many times its length. */
const SPACING = 20;
/** How far (ms of due time) before the last row claimed the next claim past the head starts. */
export const LATE_COMMIT_MS = 1_000;

/** A position of the claim order. */
export interface ClaimPosition {
  readonly priority: number;
  readonly dueAt: Date;
  readonly id: string;
}

export interface HeadSkipSettings {
  /**
   * A claim from the head that takes this long (ms), and as long again for every SLOW_ROWS rows it
   * claimed, starts the skipping (0: every claim from the head does).
   */
  readonly slowMs: number;
  /** While skipping, a claim reads from the head again after this long (ms). */
  readonly headEveryMs: number;
}

/**
 * Measured on a 2-core machine under a drain: a 500-row claim from a clean head takes 14–55 ms
 * (most of it the rows' own update and transfer), so a claim counts as slow past 50 ms plus
 * 0.1 ms per row: 100 ms for 500 rows.
 */
export const HEAD_SKIP_DEFAULTS: HeadSkipSettings = { slowMs: 50, headEveryMs: 1_000 };
/** The rows a claim may take in another `slowMs` (the default's 0.1 ms per row). */
export const SLOW_ROWS = 500;

/** A store's `slowHeadSkip` option: false turns it off; missing fields take the defaults. */
export type HeadSkipOption = { readonly slowMs?: number; readonly headEveryMs?: number } | false;

/** The settings of a `slowHeadSkip` option (null: off), or a typed error for a bad one. */
export function headSkipSettings(given: HeadSkipOption | undefined): HeadSkipSettings | null {
  if (given === false) return null;
  if (given !== undefined && (typeof given !== 'object' || given === null)) {
    throw new InvalidArgumentError('slowHeadSkip must be false or { slowMs?, headEveryMs? }');
  }
  return {
    slowMs: requireInt('slowHeadSkip.slowMs', given?.slowMs ?? HEAD_SKIP_DEFAULTS.slowMs, 0),
    headEveryMs: requireInt(
      'slowHeadSkip.headEveryMs',
      given?.headEveryMs ?? HEAD_SKIP_DEFAULTS.headEveryMs,
      1,
    ),
  };
}

interface Skipping {
  /** The last row claimed: its priority and due time (its id is never needed: see startOf). */
  last: Pick<ClaimPosition, 'priority' | 'dueAt'>;
  headReadAt: number;
  /** How long before the next claim from the head (ms). */
  headAfterMs: number;
}

/** Where each set of types' next claim starts; one per store (its claims of each set of types). */
export class HeadSkip {
  readonly #skipping = new Map<string, Skipping>();

  constructor(private readonly settings: HeadSkipSettings = HEAD_SKIP_DEFAULTS) {}

  /** The position the next claim of `types` starts at, or null: from the head. */
  startOf(types: readonly string[], now: number): ClaimPosition | null {
    const skipping = this.#skipping.get(key(types));
    if (skipping === undefined || now - skipping.headReadAt >= skipping.headAfterMs) return null;
    const { priority, dueAt } = skipping.last;
    return { priority, dueAt: new Date(dueAt.getTime() - LATE_COMMIT_MS), id: '0' };
  }

  /**
   * A claim of `types` took `tookMs`, from `start` (null: the head), and claimed `claimed` (in
   * claim order).
   */
  claimed(
    types: readonly string[],
    start: ClaimPosition | null,
    tookMs: number,
    claimed: readonly ClaimedCommand[],
    now: number,
  ): void {
    const k = key(types);
    const last = claimed.at(-1);
    const position = last ? { priority: last.priority, dueAt: last.nextRunAt } : null;
    const skipping = this.#skipping.get(k);
    if (start !== null) {
      if (skipping && position) skipping.last = position;
      return;
    }
    const headAfterMs = Math.max(this.settings.headEveryMs, SPACING * tookMs);
    if (tookMs < this.settings.slowMs * (1 + claimed.length / SLOW_ROWS)) this.#skipping.delete(k);
    else if (position) this.#skipping.set(k, { last: position, headReadAt: now, headAfterMs });
    else if (skipping) Object.assign(skipping, { headReadAt: now, headAfterMs });
  }

  /** Whether claims of `types` skip the head now. */
  isSkipping(types: readonly string[]): boolean {
    return this.#skipping.has(key(types));
  }
}

const key = (types: readonly string[]): string => types.join('\u0000');

/**
 * The window of the next reclaim scan. A scan reads the leases that lapsed within `windowMs` of the
 * database's now, or (null) every lapsed lease.
 */
export class ReclaimWindow {
  /** When (ms, performance.now) the last scan began that left nothing lapsed behind it in its range. */
  #coveredFrom: number | null = null;
  #fullAt = 0;
  /** How long after the last full scan the next one is due (ms); null: every scan is full. */
  #fullAfterMs: number | null = null;

  constructor(private readonly settings: HeadSkipSettings = HEAD_SKIP_DEFAULTS) {}

  /** The window of a scan beginning `now`: ms back from the database's now, or null for all. */
  windowOf(now: number): number | null {
    if (this.#fullAfterMs === null || this.#coveredFrom === null) return null;
    if (now - this.#fullAt >= this.#fullAfterMs) return null;
    // The margin covers the time between a claim's clock reading and its commit, and the scans'
    // own length: what lapsed before the window was there for the scan before to find.
    return now - this.#coveredFrom + RECLAIM_MARGIN_MS;
  }

  /**
   * A scan that began `startedAt` with `windowMs` took `tookMs` and reclaimed `reclaimed` of at
   * most `limit`: a full one decides whether the next ones are windowed.
   */
  scanned(
    windowMs: number | null,
    startedAt: number,
    tookMs: number,
    reclaimed: number,
    limit: number,
  ): void {
    // A scan that hit its limit may have left lapsed leases in its range: the next looks there again.
    if (reclaimed < limit) this.#coveredFrom = startedAt;
    if (windowMs !== null) return;
    this.#fullAt = startedAt;
    this.#fullAfterMs =
      tookMs < this.settings.slowMs ? null : Math.max(this.settings.headEveryMs, SPACING * tookMs);
  }
}

/** How far (ms) before the last scan's start a windowed scan reaches back. */
export const RECLAIM_MARGIN_MS = 5_000;
