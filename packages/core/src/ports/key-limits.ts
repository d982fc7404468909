import { LIMITS } from '../limits.js';
/*
 * Concurrency limits per key (docs/flow-control.md): at most `maxRunning` commands of a type
 * RUNNING at once for each value of one top-level field of their payload (e.g. `customerId`),
 * across every instance, enforced by the claims in the database.
 */

/** The most RUNNING commands a key limit allows per key. */
export const MAX_KEY_LIMIT = LIMITS.keyLimit;

/**
 * A payload field a key limit can name: a top-level field of 1 to 64 letters, digits and
 * underscores, not starting with a digit. The database reads it from the stored payload, so every
 * instance and every claim derives the same key, and no application code runs inside a claim.
 */
export const KEY_FIELD_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** A type's limit of RUNNING commands per key, as stored. */
export interface KeyLimit {
  readonly type: string;
  /** The payload field whose value (as text) is the key; a command without it has no key. */
  readonly keyField: string;
  /** 1..LIMITS.keyLimit RUNNING per key. */
  readonly maxRunning: number;
  /**
   * A weighted fair share: `{ [key]: w }`, a key of weight w takes w commands per turn of the
   * type's claims (1..LIMITS.keyWeight; a key not named takes one). Absent: none.
   */
  readonly weights?: Readonly<Record<string, number>>;
}

/** The `<table>_key_limits` rows: one per key-limited type, shared by every instance. */
export interface KeyLimitStore {
  /** Upserts the limits (the last declaration wins); INVALID_ARGUMENT, writing nothing, for a bad one. */
  declare(limits: readonly KeyLimit[]): Promise<void>;
  /** Every stored limit, ordered by type. */
  list(): Promise<KeyLimit[]>;
  /**
   * The keys with due PENDING commands of each of `types` (types whose commands carry keys: a key
   * limit, fair share or a rate limit per key; others have none) at `now`: how many keys, how many
   * of them at their key limit, and the `top` (default 10, at most LIMITS.keysWaitingTop) with
   * the most RUNNING. Reads a bounded number of rows per key, in the
   * order of `types`; INVALID_ARGUMENT for a bad type or `top`.
   */
  keysWaiting(types: readonly string[], now: Date, top?: number): Promise<KeysWaiting[]>;
}

/** How many keys KeyLimitStore.keysWaiting names by default, and at most. */
export const KEYS_WAITING_TOP = 10;
export const MAX_KEYS_WAITING_TOP = LIMITS.keysWaitingTop;
/** The due commands of a key KeyLimitStore.keysWaiting counts at most (one more says "more"). */
export const KEY_DUE_COUNTED = LIMITS.keyDueCounted;

/** A key with due PENDING commands. */
export interface KeyWaiting {
  /** The key; '' for the commands without one (they take turns as one key, and no limit holds them). */
  readonly key: string;
  /** Its due PENDING commands, counted up to LIMITS.keyDueCounted. */
  readonly due: number;
  readonly running: number;
}

/** The keys of one keyed type that have due PENDING commands. */
export interface KeysWaiting {
  readonly type: string;
  /** Keys with due PENDING commands (the commands without a key count as one). */
  readonly keys: number;
  /** Of them, those whose RUNNING commands have reached the type's key limit (0 without one). */
  readonly atLimit: number;
  /** Up to `top` of them, the most RUNNING first, then by key. */
  readonly top: readonly KeyWaiting[];
}

/** A type's rate limit per key, as stored: the rate limit's token bucket, one per key. */
export interface KeyRateLimit {
  readonly type: string;
  /** The payload field whose value (as text, its first LIMITS.rateKeyChars characters) is the key. */
  readonly keyField: string;
  /** At most this many starts per key in any window of periodMs (as RateLimit's). */
  readonly maxStarts: number;
  readonly periodMs: number;
  readonly burst: number;
}

/** The longest key a key's bucket is kept under: longer keys are cut to it. */
export const MAX_RATE_KEY_CHARS = LIMITS.rateKeyChars;

/** The `<table>_key_rate_limits` rows (and their buckets in `<table>_key_rate_buckets`). */
export interface KeyRateLimitStore {
  /**
   * Upserts the limits (the last declaration wins; buckets already there are kept);
   * INVALID_ARGUMENT, writing nothing, for a bad one. `burst` may be left out: the rate limit's default.
   */
  declare(limits: readonly (Omit<KeyRateLimit, 'burst'> & { readonly burst?: number })[]): Promise<void>;
  /** Every stored limit, ordered by type. */
  list(): Promise<KeyRateLimit[]>;
}
