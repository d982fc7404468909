import { InvalidArgumentError } from './errors.js';
import { requireInt, requireStoredTime, requireStoredType } from './input-checks.js';
import {
  MAX_RATE_LIMIT_STARTS,
  MAX_RATE_PERIOD_MS,
  MAX_RATE_TAKE,
  type RateLimit,
  type RateTakeParams,
} from './ports/rate-limits.js';

/*
 * The checks of rate limits (made before anything is written) and the token bucket's arithmetic,
 * for the adapters that compute it beside their SQL and for the one that computes it in SQL
 * (PostgreSQL) to agree with.
 */

/** The burst of a limit that names none: a tenth of maxStarts, rounded up, below maxStarts. */
export function defaultRateBurst(maxStarts: number): number {
  return Math.max(1, Math.min(maxStarts - 1, Math.ceil(maxStarts / 10)));
}

/**
 * What is wrong with a rate limit's { maxStarts, periodMs, burst? }, or null. maxStarts is at
 * least 2: the bucket refills at (maxStarts − burst) / periodMs with burst ≥ 1, and a bucket that
 * never refills would stop the type for good.
 */
export function rateLimitProblem(spec: unknown): string | null {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    return 'must be { maxStarts, periodMs, burst? }';
  }
  const { maxStarts, periodMs, burst, ...rest } = spec as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) return `has no field \`${unknown}\` (fields: maxStarts, periodMs, burst)`;
  const int = (v: unknown, min: number, max: number): boolean =>
    typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
  if (!int(maxStarts, 2, MAX_RATE_LIMIT_STARTS)) {
    return `maxStarts must be an integer in [2, ${MAX_RATE_LIMIT_STARTS}], got ${describe(maxStarts)}`;
  }
  if (!int(periodMs, 1, MAX_RATE_PERIOD_MS)) {
    return `periodMs must be an integer in [1, ${MAX_RATE_PERIOD_MS}], got ${describe(periodMs)}`;
  }
  if (burst !== undefined && !int(burst, 1, (maxStarts as number) - 1)) {
    return `burst must be an integer in [1, ${(maxStarts as number) - 1}] (below maxStarts), got ${describe(burst)}`;
  }
  return null;
}

/**
 * The limits a RateLimitStore declares: each a command type (as a type limit's) given once, with
 * a limit rateLimitProblem accepts, its burst filled in.
 */
export function requireRateLimits(limits: unknown): RateLimit[] {
  if (!Array.isArray(limits)) {
    throw new InvalidArgumentError('rate limits must be an array of { type, maxStarts, periodMs, burst? }');
  }
  const seen = new Set<string>();
  return (limits as unknown[]).map((l) => {
    const { type: given, ...spec } = (typeof l === 'object' && l !== null ? l : {}) as Record<
      string,
      unknown
    >;
    const type = requireStoredType('a rate limit', given);
    if (seen.has(type)) throw new InvalidArgumentError(`type "${type}" has two rate limits`);
    seen.add(type);
    if (spec['burst'] === undefined) delete spec['burst'];
    const problem = rateLimitProblem(spec);
    if (problem) throw new InvalidArgumentError(`the rate limit of type "${type}": ${problem}`);
    const maxStarts = spec['maxStarts'] as number;
    return {
      type,
      maxStarts,
      periodMs: spec['periodMs'] as number,
      burst: (spec['burst'] as number | undefined) ?? defaultRateBurst(maxStarts),
    };
  });
}

/** A take's parameters, checked; `now` null for the database clock. */
export function requireRateTake(params: unknown): { type: string; want: number; now: Date | null } {
  if (params === null || typeof params !== 'object') {
    throw new InvalidArgumentError('a rate take needs { type, want, now? }');
  }
  const { type, want, now } = params as Partial<Record<keyof RateTakeParams, unknown>>;
  return {
    type: requireStoredType('a rate take', type),
    want: requireInt('want', want, 1, MAX_RATE_TAKE),
    now: now === undefined ? null : requireStoredTime('now', now),
  };
}

/** A give-back's parameters, checked. */
export function requireRateGiveBack(
  type: unknown,
  n: unknown,
  takenAt: unknown,
): { type: string; n: number; takenAt: Date } {
  return {
    type: requireStoredType('a rate give-back', type),
    n: requireInt('the tokens given back', n, 0, MAX_RATE_TAKE),
    takenAt: requireStoredTime('takenAt', takenAt),
  };
}

/** A bucket as stored: its limit, its (fractional) tokens and when they were last refilled. */
export interface RateBucket {
  readonly maxStarts: number;
  readonly periodMs: number;
  readonly burst: number;
  readonly tokens: number;
  /** Epoch milliseconds, fractional where the database keeps more. */
  readonly refilledAtMs: number;
}

/**
 * The bucket refilled to `atMs` (never backwards: a time before its last refill refills nothing,
 * so a taker that read the clock before waiting on another's lock loses no time). Multiplied
 * before divided, so whole periods give whole tokens exactly.
 */
export function refillRateBucket(b: RateBucket, atMs: number): { tokens: number; atMs: number } {
  const at = Math.max(b.refilledAtMs, atMs);
  const refilled = ((at - b.refilledAtMs) * (b.maxStarts - b.burst)) / b.periodMs;
  return { tokens: Math.min(b.burst, b.tokens + refilled), atMs: at };
}

/** Takes up to `want` whole tokens at `atMs`: what is granted, left, and when a token is next there. */
export function takeFromRateBucket(
  b: RateBucket,
  want: number,
  atMs: number,
): { granted: number; tokens: number; atMs: number; nextTokenInMs: number } {
  const refilled = refillRateBucket(b, atMs);
  const granted = Math.max(0, Math.min(want, Math.floor(refilled.tokens)));
  const tokens = refilled.tokens - granted;
  return { granted, tokens, atMs: refilled.atMs, nextTokenInMs: msUntilRateToken(b, tokens) };
}

/** Milliseconds until a bucket of this limit holding `tokens` holds a whole one (0 if it does). */
export function msUntilRateToken(limit: Omit<RateBucket, 'tokens' | 'refilledAtMs'>, tokens: number): number {
  if (tokens >= 1) return 0;
  // Less a hair of rounding: 75.00000000000001 ms is 75 (a wake-up that early finds the token whole).
  return Math.max(1, Math.ceil(((1 - tokens) * limit.periodMs) / (limit.maxStarts - limit.burst) - 1e-6));
}

/**
 * The bucket after `n` unused tokens of a take at `takenAtMs` come back at `atMs`: worth n less
 * what it refilled meanwhile (that refill would have been capped had the tokens stayed), at most
 * the burst.
 */
export function refundToRateBucket(
  b: RateBucket,
  n: number,
  takenAtMs: number,
  atMs: number,
): { tokens: number; atMs: number } {
  const refilled = refillRateBucket(b, atMs);
  const sinceTake = Math.max(0, refilled.atMs - takenAtMs);
  const worth = Math.max(0, n - (sinceTake * (b.maxStarts - b.burst)) / b.periodMs);
  return { tokens: Math.min(b.burst, refilled.tokens + worth), atMs: refilled.atMs };
}

function describe(v: unknown): string {
  return typeof v === 'number' || typeof v === 'boolean' ? String(v) : v === null ? 'null' : typeof v;
}
