import type { CommandStore, RateGrant, RateLimitSpec, RateLimitStore } from '@asynccmd/core';
import { rateLimitProblem } from '@asynccmd/core';
import { DeclaredLimits } from './declared-limits.js';
import { LIMITS } from '@asynccmd/core';

/** A type's rate limit as the `rateLimits` option gives it. */
export interface RateLimitOptions {
  /** At most this many starts of the type in any window of `periodMs`, across every instance (≥ 2). */
  readonly maxStarts: number;
  readonly periodMs: number;
  /**
   * The most starts at once after a quiet spell (1..maxStarts − 1); default a tenth of maxStarts,
   * rounded up. The sustained rate is (maxStarts − burst) per periodMs.
   */
  readonly burst?: number;
}

/** What is wrong with the `rateLimits` option ("must …"), or null. */
export function rateLimitsOptionProblem(v: unknown): string | null {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    return 'must map command types to { maxStarts, periodMs, burst? }';
  }
  for (const [type, spec] of Object.entries(v)) {
    if (type.length === 0 || [...type].length > LIMITS.typeChars || type.includes('\u0000')) {
      return `has a type name that is not 1 to ${LIMITS.typeChars} characters without NUL`;
    }
    const problem = rateLimitProblem(spec);
    if (problem) return `type "${type}": ${problem}`;
  }
  return null;
}

/** The shortest wait for a token: a type throttled elsewhere must not spin this loop. */
export const MIN_RATE_WAKE_MS = 10;

/**
 * The `rateLimits` option of this runtime, kept in the store's `<table>_rate_limits`: the takes
 * read the stored bucket.
 */
export class DeclaredRateLimits extends DeclaredLimits<RateLimitSpec, RateLimitStore> {
  constructor(store: CommandStore, limits: Readonly<Record<string, RateLimitOptions>>) {
    super(
      Object.entries(limits).map(([type, l]) => ({
        type,
        maxStarts: l.maxStarts,
        periodMs: l.periodMs,
        ...(l.burst === undefined ? {} : { burst: l.burst }),
      })),
      store.rateLimits,
      { option: 'rateLimits', keeps: 'rate limits', dialect: store.dialect },
    );
  }

  /** Of `types`, those with a rate limit here, sorted; null when none has one (their claims stay as they are). */
  among(types: readonly string[]): string[] | null {
    if (this.types.size === 0) return null;
    const rated = types.filter((t) => this.types.has(t));
    return rated.length === 0 ? null : [...new Set(rated)].sort();
  }

  /** Takes up to `want` tokens of `type` (declared first). */
  async take(type: string, want: number): Promise<RateGrant> {
    await this.ready();
    return (this.store as RateLimitStore).take({ type, want });
  }

  /** Gives back tokens a claim did not use; a failure only costs the tokens. */
  async giveBack(type: string, n: number, takenAt: Date | null): Promise<void> {
    if (n <= 0 || takenAt === null || this.store === null) return;
    await this.store.giveBack(type, n, takenAt).catch(() => undefined);
  }
}
