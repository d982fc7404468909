import {
  InvalidArgumentError,
  type CommandStore,
  type KeyLimit,
  type KeyRateLimit,
  type RateLimitState,
} from '@asynccmd/core';

/*
 * Changing a flow limit at run time, for every instance at once (docs/flow-control.md): the claims
 * read the stored limit, so a change applies at each instance's next claim. An instance that
 * starts later declares its own options' limits again. The store checks every field
 * (INVALID_ARGUMENT, nothing written); here, the fields a change may name and the kind of limit
 * the type already has.
 */

/** What a change names, as an admin request's JSON body or the CLI's options give it. */
export type FlowLimitChange = Readonly<Record<string, unknown>>;

function onlyFields(change: FlowLimitChange, what: string, fields: readonly string[]): void {
  const extra = Object.keys(change).find((key) => !fields.includes(key));
  if (extra !== undefined) {
    throw new InvalidArgumentError(
      `${what} takes ${fields.join(', ')}, not ${JSON.stringify(extra.slice(0, 40))}`,
    );
  }
}

const optional = <K extends string>(key: K, value: unknown): Partial<Record<K, number>> =>
  value === undefined ? {} : ({ [key]: value as number } as Partial<Record<K, number>>);

/** Stores a type's rate limit `{ maxStarts, periodMs, burst? }`; the bucket keeps its tokens (at most the new burst). */
export async function setRateLimit(
  store: CommandStore,
  type: string,
  change: FlowLimitChange,
): Promise<RateLimitState> {
  onlyFields(change, 'a rate limit', ['maxStarts', 'periodMs', 'burst']);
  const limits = store.rateLimits;
  await limits.declare([
    {
      type,
      maxStarts: change['maxStarts'] as number,
      periodMs: change['periodMs'] as number,
      ...optional('burst', change['burst']),
    },
  ]);
  const stored = (await limits.list()).find((l) => l.type === type);
  if (stored === undefined) throw new Error(`the rate limit of ${type} was not stored`);
  return stored;
}

/**
 * The key field a change of `type`'s limit per key uses: the one it names, else the one stored for
 * the type; INVALID_ARGUMENT when the type has a limit of another kind, or neither names a field.
 */
async function keyFieldFor(
  store: CommandStore,
  type: string,
  change: FlowLimitChange,
  kind: 'keyLimit' | 'keyRateLimit',
): Promise<string> {
  const [keyLimits, keyRateLimits, typeLimits] = await Promise.all([
    store.keyLimits.list(),
    store.keyRateLimits.list(),
    store.typeLimits.list(),
  ]);
  const other =
    kind === 'keyLimit'
      ? keyRateLimits.some((l) => l.type === type)
        ? 'a rate limit per key'
        : typeLimits.some((l) => l.type === type)
          ? 'a type limit'
          : null
      : keyLimits.some((l) => l.type === type)
        ? 'a key limit or fair share'
        : null;
  if (other !== null) {
    throw new InvalidArgumentError(`type ${JSON.stringify(type)} has ${other} stored; a type takes one kind`);
  }
  const given = change['key'];
  if (given !== undefined) {
    if (typeof given !== 'string') throw new InvalidArgumentError('key must name a top-level payload field');
    return given;
  }
  const stored = (kind === 'keyLimit' ? keyLimits : keyRateLimits).find((l) => l.type === type);
  if (stored === undefined) {
    throw new InvalidArgumentError(
      `type ${JSON.stringify(type)} has no stored limit per key: name its key field (key)`,
    );
  }
  return stored.keyField;
}

/**
 * Stores a type's limit of RUNNING commands per key `{ maxRunning?, key?, weights? }`: `key`
 * defaults to the stored field, `maxRunning` to the stored limit, `weights` (a weighted fair share's
 * `{ [key]: w }`; `{}` for none) to the stored weights. A fair-share type is kept as a key limit
 * never reached (LIMITS.keyLimit): given a lower one, its instances' claims hold its keys to it.
 */
export async function setKeyLimit(
  store: CommandStore,
  type: string,
  change: FlowLimitChange,
): Promise<KeyLimit> {
  onlyFields(change, 'a key limit', ['maxRunning', 'key', 'weights']);
  const keyField = await keyFieldFor(store, type, change, 'keyLimit');
  const before = (await store.keyLimits.list()).find((l) => l.type === type);
  const maxRunning = change['maxRunning'] ?? before?.maxRunning;
  if (maxRunning === undefined) {
    throw new InvalidArgumentError(`type ${JSON.stringify(type)} has no stored key limit: give maxRunning`);
  }
  const weights = change['weights'] === undefined ? before?.weights : change['weights'];
  const hasWeights =
    weights !== undefined &&
    !(typeof weights === 'object' && weights !== null && Object.keys(weights).length === 0);
  await store.keyLimits.declare([
    {
      type,
      keyField,
      maxRunning: maxRunning as number,
      ...(hasWeights ? { weights: weights as Record<string, number> } : {}),
    },
  ]);
  const stored = (await store.keyLimits.list()).find((l) => l.type === type);
  if (stored === undefined) throw new Error(`the key limit of ${type} was not stored`);
  return stored;
}

/** Stores a type's rate limit per key `{ maxStarts, periodMs, burst?, key? }` (`key` defaults to the stored field). */
export async function setKeyRateLimit(
  store: CommandStore,
  type: string,
  change: FlowLimitChange,
): Promise<KeyRateLimit> {
  onlyFields(change, 'a rate limit per key', ['maxStarts', 'periodMs', 'burst', 'key']);
  const keyField = await keyFieldFor(store, type, change, 'keyRateLimit');
  await store.keyRateLimits.declare([
    {
      type,
      keyField,
      maxStarts: change['maxStarts'] as number,
      periodMs: change['periodMs'] as number,
      ...optional('burst', change['burst']),
    },
  ]);
  const stored = (await store.keyRateLimits.list()).find((l) => l.type === type);
  if (stored === undefined) throw new Error(`the rate limit per key of ${type} was not stored`);
  return stored;
}
