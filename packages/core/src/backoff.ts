/** How long to wait before retry number `n` (0 for the first retry). */
export interface BackoffPolicy {
  delayMs(retryNumber: number): number;
}

export interface ExponentialBackoffOptions {
  /** Delay before the first retry. Default 60 s. */
  readonly baseMs?: number;
  /** Upper bound. Default 1 h. */
  readonly capMs?: number;
  /**
   * Fraction of the delay to randomise downwards (0 = none, 1 = "full jitter"), so a burst of
   * failures does not come back as a burst. The delay stays within [raw·(1 − jitter), raw].
   */
  readonly jitter?: number;
  /** Source of randomness in [0, 1); injected so tests are deterministic. */
  readonly random?: () => number;
}

export const DEFAULT_BACKOFF_BASE_MS = 60_000;
export const DEFAULT_BACKOFF_CAP_MS = 3_600_000;

/** min(base·2ⁿ, cap), optionally jittered. */
export function exponentialBackoff(options: ExponentialBackoffOptions = {}): BackoffPolicy {
  const base = options.baseMs ?? DEFAULT_BACKOFF_BASE_MS;
  const cap = options.capMs ?? DEFAULT_BACKOFF_CAP_MS;
  const jitter = Math.min(1, Math.max(0, options.jitter ?? 0));
  const random = options.random ?? Math.random;
  if (!(base >= 0) || !(cap >= 0)) throw new RangeError('backoff baseMs and capMs must be ≥ 0');
  return {
    delayMs(retryNumber: number): number {
      const n = Math.max(0, Math.floor(retryNumber));
      // 2^n overflows to Infinity for large n: min() with the cap keeps the result finite, and a
      // zero base must stay 0 rather than become 0·∞ = NaN.
      const raw = base === 0 ? 0 : Math.min(cap, base * Math.pow(2, n));
      if (jitter === 0) return raw;
      return Math.round(raw * (1 - jitter * random()));
    },
  };
}

/** Retries right away: for tests and for commands whose failures are always transient. */
export const immediateBackoff: BackoffPolicy = { delayMs: () => 0 };
