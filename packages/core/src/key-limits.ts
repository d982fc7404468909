import { InvalidArgumentError } from './errors.js';
import { LIMITS } from './limits.js';
import { requireInt, requireStoredType } from './input-checks.js';
import { KEY_FIELD_PATTERN, MAX_KEY_LIMIT, type KeyLimit, type KeyRateLimit } from './ports/key-limits.js';
import { defaultRateBurst, rateLimitProblem } from './rate-limits.js';

/** What is wrong with a key limit's { key, maxRunning } (as the runtime option gives it), or null. */
export function keyLimitProblem(spec: unknown): string | null {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    return 'must be { key, maxRunning, weights? }';
  }
  const { key, maxRunning, weights, ...rest } = spec as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) return `has no field \`${unknown}\` (fields: key, maxRunning, weights)`;
  if (typeof key !== 'string' || !KEY_FIELD_PATTERN.test(key)) {
    return `key must name a top-level payload field (1 to 64 letters, digits or _, not starting with a digit), got ${describe(key)}`;
  }
  if (
    typeof maxRunning !== 'number' ||
    !Number.isInteger(maxRunning) ||
    maxRunning < 1 ||
    maxRunning > MAX_KEY_LIMIT
  ) {
    return `maxRunning must be an integer in [1, ${MAX_KEY_LIMIT}], got ${describe(maxRunning)}`;
  }
  return weights === undefined ? null : keyWeightsProblem(weights);
}

/** The limits a KeyLimitStore declares: each type once, with a field KEY_FIELD_PATTERN accepts. */
export function requireKeyLimits(limits: unknown): KeyLimit[] {
  if (!Array.isArray(limits)) {
    throw new InvalidArgumentError('key limits must be an array of { type, keyField, maxRunning }');
  }
  const seen = new Set<string>();
  return (limits as unknown[]).map((l) => {
    const entry = (typeof l === 'object' && l !== null ? l : {}) as Record<string, unknown>;
    const type = requireStoredType('a key limit', entry['type']);
    if (seen.has(type)) throw new InvalidArgumentError(`type "${type}" has two key limits`);
    seen.add(type);
    const keyField = entry['keyField'];
    if (typeof keyField !== 'string' || !KEY_FIELD_PATTERN.test(keyField)) {
      throw new InvalidArgumentError(
        `the key limit of type "${type}": keyField must name a top-level payload field (1 to 64 letters, digits or _)`,
      );
    }
    const maxRunning = requireInt(`the key limit of type "${type}"`, entry['maxRunning'], 1, MAX_KEY_LIMIT);
    const weights = entry['weights'];
    if (weights === undefined) return { type, keyField, maxRunning };
    const problem = keyWeightsProblem(weights);
    if (problem !== null) throw new InvalidArgumentError(`the key limit of type "${type}": ${problem}`);
    // Ordered by key: the stored text is the same for the same weights.
    const ordered = Object.entries(weights as Record<string, number>).sort(([a], [b]) =>
      a < b ? -1 : a > b ? 1 : 0,
    );
    return ordered.length === 0
      ? { type, keyField, maxRunning }
      : { type, keyField, maxRunning, weights: Object.fromEntries(ordered) };
  });
}

function describe(v: unknown): string {
  return typeof v === 'number' || typeof v === 'boolean'
    ? String(v)
    : v === null
      ? 'null'
      : typeof v === 'string'
        ? JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)
        : typeof v;
}

/** What is wrong with a per-key rate limit's { key, maxStarts, periodMs, burst? }, or null. */
export function keyRateLimitProblem(spec: unknown): string | null {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    return 'must be { key, maxStarts, periodMs, burst? }';
  }
  const { key, ...rate } = spec as Record<string, unknown>;
  if (typeof key !== 'string' || !KEY_FIELD_PATTERN.test(key)) {
    return `key must name a top-level payload field (1 to 64 letters, digits or _, not starting with a digit), got ${describe(key)}`;
  }
  return rateLimitProblem(rate)?.replace('(fields: maxStarts', '(fields: key, maxStarts') ?? null;
}

/** The limits a KeyRateLimitStore declares: each type once, its burst filled in. */
export function requireKeyRateLimits(limits: unknown): KeyRateLimit[] {
  if (!Array.isArray(limits)) {
    throw new InvalidArgumentError(
      'key rate limits must be an array of { type, keyField, maxStarts, periodMs, burst? }',
    );
  }
  const seen = new Set<string>();
  return (limits as unknown[]).map((l) => {
    const {
      type: given,
      keyField,
      ...rate
    } = (typeof l === 'object' && l !== null ? l : {}) as Record<string, unknown>;
    const type = requireStoredType('a key rate limit', given);
    if (seen.has(type)) throw new InvalidArgumentError(`type "${type}" has two key rate limits`);
    seen.add(type);
    if (rate['burst'] === undefined) delete rate['burst'];
    const problem = keyRateLimitProblem({ key: keyField, ...rate });
    if (problem) throw new InvalidArgumentError(`the key rate limit of type "${type}": ${problem}`);
    const maxStarts = rate['maxStarts'] as number;
    return {
      type,
      keyField: keyField as string,
      maxStarts,
      periodMs: rate['periodMs'] as number,
      burst: (rate['burst'] as number | undefined) ?? defaultRateBurst(maxStarts),
    };
  });
}

/**
 * What is wrong with a weighted fair share's weights (`{ [key]: weight }`), or null: each key 1 to
 * LIMITS.rateKeyChars characters (what a command's key holds), each weight an integer from 1 to
 * LIMITS.keyWeight, at most LIMITS.weightedKeys keys.
 */
export function keyWeightsProblem(weights: unknown): string | null {
  if (weights === null || typeof weights !== 'object' || Array.isArray(weights)) {
    return 'weights must map keys to whole numbers, e.g. { acme: 3 }';
  }
  const entries = Object.entries(weights);
  if (entries.length > LIMITS.weightedKeys) {
    return `weights name ${entries.length} keys, more than ${LIMITS.weightedKeys}`;
  }
  for (const [key, weight] of entries) {
    if (key.length === 0 || [...key].length > LIMITS.rateKeyChars || key.includes('\u0000')) {
      return `a weighted key must be 1 to ${LIMITS.rateKeyChars} characters without NUL`;
    }
    if (typeof weight !== 'number' || !Number.isInteger(weight) || weight < 1 || weight > LIMITS.keyWeight) {
      return `the weight of a key must be an integer in [1, ${LIMITS.keyWeight}], got ${describe(weight)}`;
    }
  }
  return null;
}
