import type { CommandStore, KeyLimit, KeyLimitStore, KeyRateLimit, KeyRateLimitStore } from '@asynccmd/core';
import { defaultRateBurst, keyLimitProblem, keyRateLimitProblem } from '@asynccmd/core';
import { DeclaredLimits } from './declared-limits.js';
import { LIMITS } from '@asynccmd/core';

/** A type's per-key concurrency limit as the `keyLimits` option gives it. */
export interface KeyLimitOptions {
  /** The top-level payload field whose value (as text) is the key, e.g. 'customerId'. */
  readonly key: string;
  /** At most this many commands of the type RUNNING at once per key, across every instance. */
  readonly maxRunning: number;
  /** `{ [key]: w }`: a key of weight w takes w commands per turn of the claims (default 1; 1..1,000). */
  readonly weights?: Readonly<Record<string, number>>;
}

/** What is wrong with the `keyLimits` option ("must …"), or null; `typeLimits` may not name its types. */
export function keyLimitsOptionProblem(v: unknown, typeLimits: unknown): string | null {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    return 'must map command types to { key, maxRunning }';
  }
  for (const [type, spec] of Object.entries(v)) {
    if (type.length === 0 || [...type].length > LIMITS.typeChars || type.includes('\u0000')) {
      return `has a type name that is not 1 to ${LIMITS.typeChars} characters without NUL`;
    }
    const problem = keyLimitProblem(spec);
    if (problem) return `type "${type}": ${problem}`;
    if (typeLimits !== null && typeof typeLimits === 'object' && Object.hasOwn(typeLimits, type)) {
      return `type "${type}": has a \`typeLimits\` limit too; a type takes one or the other`;
    }
  }
  return null;
}

/**
 * The `keyLimits` option of this runtime, kept in the store's `<table>_key_limits`: the keyed claims
 * read the stored rows (the last declaration wins).
 */
export class DeclaredKeyLimits extends DeclaredLimits<KeyLimit, KeyLimitStore> {
  constructor(store: CommandStore, limits: Readonly<Record<string, KeyLimitOptions>>) {
    super(
      Object.entries(limits).map(([type, l]) => ({
        type,
        keyField: l.key,
        maxRunning: l.maxRunning,
        ...(l.weights === undefined ? {} : { weights: l.weights }),
      })),
      store.keyLimits,
      { option: 'keyLimits', keeps: 'key limits', dialect: store.dialect },
    );
  }

  /** Of `types`, those with a key limit here; null when none has one (their claims stay as they are). */
  among(types: readonly string[]): string[] | null {
    if (this.types.size === 0) return null;
    const keyed = types.filter((t) => this.types.has(t));
    return keyed.length === 0 ? null : keyed;
  }
}

/** A type's rate limit per key as the `keyRateLimits` option gives it. */
export interface KeyRateLimitOptions {
  /** The top-level payload field whose value (as text) is the key, e.g. 'tenant'. */
  readonly key: string;
  /** At most this many starts per key in any window of `periodMs`, across every instance (≥ 2). */
  readonly maxStarts: number;
  readonly periodMs: number;
  /** As a rate limit's: default a tenth of maxStarts; the sustained rate is (maxStarts − burst) per periodMs. */
  readonly burst?: number;
}

/** What is wrong with the `keyRateLimits` option, or null; no other limit option may name its types. */
export function keyRateLimitsOptionProblem(
  v: unknown,
  others: Readonly<Record<string, unknown>>,
): string | null {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    return 'must map command types to { key, maxStarts, periodMs, burst? }';
  }
  for (const [type, spec] of Object.entries(v)) {
    if (type.length === 0 || [...type].length > LIMITS.typeChars || type.includes('\u0000')) {
      return `has a type name that is not 1 to ${LIMITS.typeChars} characters without NUL`;
    }
    const problem = keyRateLimitProblem(spec);
    if (problem) return `type "${type}": ${problem}`;
    for (const [option, given] of Object.entries(others)) {
      if (given !== null && typeof given === 'object' && Object.hasOwn(given, type)) {
        return `type "${type}": has a \`${option}\` limit too; a type with a rate limit per key takes no other`;
      }
    }
  }
  return null;
}

/** The `keyRateLimits` option of this runtime, kept in the store's `<table>_key_rate_limits`. */
export class DeclaredKeyRateLimits extends DeclaredLimits<KeyRateLimit, KeyRateLimitStore> {
  readonly #limits: readonly KeyRateLimit[];

  constructor(store: CommandStore, options: Readonly<Record<string, KeyRateLimitOptions>>) {
    const limits = Object.entries(options).map(([type, l]) => ({
      type,
      keyField: l.key,
      maxStarts: l.maxStarts,
      periodMs: l.periodMs,
      burst: l.burst ?? defaultRateBurst(l.maxStarts),
    }));
    super(limits, store.keyRateLimits, {
      option: 'keyRateLimits',
      keeps: 'key rate limits',
      dialect: store.dialect,
    });
    this.#limits = limits;
  }

  /** The shortest time a key's bucket of these types takes to refill one token (ms), or null. */
  tokenIntervalMs(types: readonly string[]): number | null {
    let shortest: number | null = null;
    for (const limit of this.#limits) {
      if (!types.includes(limit.type)) continue;
      const interval = limit.periodMs / (limit.maxStarts - limit.burst);
      shortest = shortest === null ? interval : Math.min(shortest, interval);
    }
    return shortest === null ? null : Math.ceil(shortest);
  }

  /** Of `types`, those with a rate limit per key here; null when none has one. */
  among(types: readonly string[]): string[] | null {
    if (this.types.size === 0) return null;
    const rated = types.filter((t) => this.types.has(t));
    return rated.length === 0 ? null : rated;
  }
}

/**
 * A type's fair share as the `fairShare` option gives it: the payload field whose values take
 * turns, and the keys that take more than one command per turn (a weighted fair share).
 */
export interface FairShareOptions {
  readonly key: string;
  /** `{ [key]: weight }`: a key of weight w takes w commands per turn (default 1; 1..1,000). */
  readonly weights?: Readonly<Record<string, number>>;
}

/** What is wrong with the `fairShare` option, or null; `typeLimits`, `keyLimits` and `keyRateLimits` may not name its types. */
export function fairShareOptionProblem(v: unknown, others: Readonly<Record<string, unknown>>): string | null {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    return 'must map command types to { key, weights? }';
  }
  for (const [type, spec] of Object.entries(v)) {
    if (type.length === 0 || [...type].length > LIMITS.typeChars || type.includes('\u0000')) {
      return `has a type name that is not 1 to ${LIMITS.typeChars} characters without NUL`;
    }
    const fields =
      spec !== null && typeof spec === 'object' && !Array.isArray(spec) ? Object.keys(spec) : null;
    const extra = fields?.find((f) => f !== 'key' && f !== 'weights');
    if (fields === null || extra !== undefined) {
      return `type "${type}": must be { key, weights? }${extra === undefined ? '' : ` (no field \`${extra}\`)`}`;
    }
    const problem = keyLimitProblem({ ...(spec as object), maxRunning: LIMITS.keyLimit });
    if (problem) return `type "${type}": ${problem}`;
    for (const [option, given] of Object.entries(others)) {
      if (given !== null && typeof given === 'object' && Object.hasOwn(given, type)) {
        return `type "${type}": has a \`${option}\` limit too (a key limit's claims take turns across keys already)`;
      }
    }
  }
  return null;
}

/**
 * The key limits this runtime declares: `keyLimits`, and each `fairShare` type as a key limit of
 * LIMITS.keyLimit per key (its claims take turns across keys; the limit itself is never reached).
 */
export function declaredKeyLimits(
  keyLimits: Readonly<Record<string, KeyLimitOptions>> | undefined,
  fairShare: Readonly<Record<string, FairShareOptions>> | undefined,
): Record<string, KeyLimitOptions> {
  const fair = Object.entries(fairShare ?? {}).map(([type, f]) => [
    type,
    { key: f.key, maxRunning: LIMITS.keyLimit, ...(f.weights === undefined ? {} : { weights: f.weights }) },
  ]);
  return { ...Object.fromEntries(fair), ...keyLimits };
}
