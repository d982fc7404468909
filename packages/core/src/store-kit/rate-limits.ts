import type { RateGrant, RateLimit, RateLimitState, RateLimitStore } from '../ports/rate-limits.js';
import { msUntilRateToken, requireRateGiveBack, requireRateLimits, requireRateTake } from '../rate-limits.js';

/** A take as an adapter's statement(s) report it: null when the type has no stored limit. */
export interface RateTakeRow {
  readonly granted: number;
  /** Tokens left in the bucket after the take (fractional). */
  readonly tokens: number;
  /** The database time of the take, epoch ms (fractional where the database keeps more). */
  readonly takenAtMs: number;
  readonly maxStarts: number;
  readonly periodMs: number;
  readonly burst: number;
}

/** The statements of an adapter's `<table>_rate_limits`, given checked input. */
export interface RateLimitStatements {
  /** Upserts the limits (at least one) as RateLimitStore.declare says. */
  readonly write: (limits: readonly RateLimit[]) => Promise<unknown>;
  /** Every row, ordered by type, its tokens refilled to the database clock (fractional). */
  readonly read: () => Promise<readonly RateLimitState[]>;
  /** The atomic refill-and-take; `now` null for the database clock. */
  readonly take: (type: string, want: number, now: Date | null) => Promise<RateTakeRow | null>;
  /** The refund of `n` (≥ 1) tokens taken at `takenAt`, as RateLimitStore.giveBack says. */
  readonly giveBack: (type: string, n: number, takenAt: Date) => Promise<unknown>;
}

/** A RateLimitStore over the adapter's statements: every call's input is checked first. */
export function rateLimitStore(sql: RateLimitStatements): RateLimitStore {
  return {
    async declare(limits) {
      const checked = requireRateLimits(limits);
      if (checked.length > 0) await sql.write(checked);
    },
    async list() {
      return (await sql.read()).map((r) => ({
        type: r.type,
        maxStarts: Number(r.maxStarts),
        periodMs: Number(r.periodMs),
        burst: Number(r.burst),
        tokens: Math.floor(Number(r.tokens)),
      }));
    },
    async take(params): Promise<RateGrant> {
      const { type, want, now } = requireRateTake(params);
      const row = await sql.take(type, want, now);
      if (row === null) return { granted: 0, nextTokenInMs: null, takenAt: null };
      return {
        granted: row.granted,
        nextTokenInMs: msUntilRateToken(row, row.tokens),
        // Floored to the millisecond: a give-back then counts a little more refill, never less.
        takenAt: new Date(Math.floor(row.takenAtMs)),
      };
    },
    async giveBack(type, n, takenAt) {
      const checked = requireRateGiveBack(type, n, takenAt);
      if (checked.n > 0) await sql.giveBack(checked.type, checked.n, checked.takenAt);
    },
  };
}
