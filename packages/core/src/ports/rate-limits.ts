/*
 * Rate limits per command type: at most `maxStarts` claims of the type in any window of `periodMs`,
 * for every instance together, kept as a token bucket in `<table>_rate_limits` on the database
 * clock. The bucket holds at most `burst` tokens and refills at (maxStarts − burst) / periodMs, so a
 * window of periodMs takes at most burst + (maxStarts − burst) = maxStarts tokens; the sustained
 * rate is (maxStarts − burst) per periodMs. Each claim of the type spends one token.
 */
import { LIMITS } from '../limits.js';

/** The most starts per period a rate limit allows. */
export const MAX_RATE_LIMIT_STARTS = LIMITS.rateLimitStarts;
/** The longest period of a rate limit: 7 days. */
export const MAX_RATE_PERIOD_MS = LIMITS.ratePeriodMs;
/** The most tokens one take asks for, or one give-back returns. */
export const MAX_RATE_TAKE = LIMITS.rateTake;

/** A type's rate limit as declared: `burst` defaults to defaultRateBurst(maxStarts). */
export interface RateLimitSpec {
  readonly type: string;
  /** 2..MAX_RATE_LIMIT_STARTS: the most starts in any window of `periodMs`. */
  readonly maxStarts: number;
  /** 1..MAX_RATE_PERIOD_MS. */
  readonly periodMs: number;
  /** 1..maxStarts − 1: the most starts at once after a quiet spell (the bucket's capacity). */
  readonly burst?: number;
}

/** A type's rate limit as stored. */
export type RateLimit = Required<RateLimitSpec>;

/** A stored rate limit and its bucket now. */
export interface RateLimitState extends RateLimit {
  /** Whole tokens in the bucket now (database clock): starts it would grant at once. */
  readonly tokens: number;
}

export interface RateTakeParams {
  readonly type: string;
  /** 1..MAX_RATE_TAKE: the starts the caller would make. */
  readonly want: number;
  /**
   * The time to refill the bucket to, instead of the database clock (tests). A time before the
   * bucket's last refill refills nothing.
   */
  readonly now?: Date;
}

export interface RateGrant {
  /** Whole tokens taken: 0..want. */
  readonly granted: number;
  /**
   * Milliseconds until the bucket holds a whole token again (0 when one is left); null when the
   * type has no stored rate limit (then nothing is granted).
   */
  readonly nextTokenInMs: number | null;
  /** The database time the tokens were taken at (what giveBack needs); null without a stored limit. */
  readonly takenAt: Date | null;
}

/** The `<table>_rate_limits` rows: one token bucket per rate-limited type, shared by every instance. */
export interface RateLimitStore {
  /**
   * Stores each given limit, replacing the type's stored one (the last declaration wins); a new
   * type's bucket starts full, a known one keeps its tokens (at most the new burst). Rows of other
   * types stay. A bad limit or type name is refused (INVALID_ARGUMENT) before anything is written.
   */
  declare(limits: readonly RateLimitSpec[]): Promise<void>;
  /** Every stored limit with its bucket now, by type. */
  list(): Promise<RateLimitState[]>;
  /**
   * Atomically refills the type's bucket by the database time elapsed since its last refill and
   * takes up to `want` whole tokens; concurrent takers never get more than the bucket held. A type
   * without a stored limit gets nothing.
   */
  take(params: RateTakeParams): Promise<RateGrant>;
  /**
   * Returns `n` tokens of a take at `takenAt` that were not used (a claim found fewer commands).
   * The refund is worth n less what the bucket refilled since `takenAt`, and the bucket never
   * holds more than its burst: a slow claim cannot let more than maxStarts through in a period.
   */
  giveBack(type: string, n: number, takenAt: Date): Promise<void>;
}
