import { requireInt, requireStoredType } from '../input-checks.js';
import { requireKeyLimits } from '../key-limits.js';
import { InvalidArgumentError } from '../errors.js';
import {
  KEYS_WAITING_TOP,
  MAX_KEY_LIMIT,
  MAX_KEYS_WAITING_TOP,
  type KeyLimit,
  type KeyLimitStore,
} from '../ports/key-limits.js';
import { keysWaitingOf, type KeyedClaimReader } from './keyed-reads.js';
import type { CommandRecord } from '../command.js';
import { byClaimOrder } from './rows.js';
import { limitedAmong } from './type-limits.js';

/** Which of a claim's types honour which per-key limit (checked: see CheckedClaimDue). */
export interface KeyedClaimTypes {
  readonly keyedTypes: readonly string[];
  readonly keyRatedTypes: readonly string[];
}

/** A claim that names keyed or key-rated types (else the engine's claim without them, untouched). */
export function namesKeyLimits(claim: KeyedClaimTypes): boolean {
  return claim.keyedTypes.length > 0 || claim.keyRatedTypes.length > 0;
}

/**
 * A claim round of `types` up to `limit` where `keyRatedTypes` and `keyedTypes` honour their stored
 * per-key limits: each such type first, alone (one limit-row lock at a time, in type order, so two
 * claimers never wait on each other crosswise), then `others` — the claim the engine makes without
 * them — for the remaining types and what is left.
 */
export async function claimWithinKeyLimits<Row>(
  types: readonly string[],
  given: KeyedClaimTypes,
  limit: number,
  steps: {
    /** In one transaction: lock the type's key-limit row, count RUNNING per key, claim at most `max`. */
    readonly claimKeyed: (type: string, max: number) => Promise<Row[]>;
    /** In one transaction: claimWithinKeyRate of the type, at most `max`. */
    readonly claimKeyRated: (type: string, max: number) => Promise<Row[]>;
    readonly others: (types: string[], max: number) => Promise<Row[]>;
  },
): Promise<Row[]> {
  const keyed = limitedAmong(types, given.keyedTypes);
  const rated = limitedAmong(types, given.keyRatedTypes);
  const claimed: Row[] = [];
  const each: [string, (type: string, max: number) => Promise<Row[]>][] = [
    ...rated.map((t): [string, typeof steps.claimKeyRated] => [t, steps.claimKeyRated]),
    ...keyed.map((t): [string, typeof steps.claimKeyed] => [t, steps.claimKeyed]),
  ].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [type, claim] of each) {
    if (claimed.length >= limit) return claimed;
    claimed.push(...(await claim(type, limit - claimed.length)));
  }
  const rest = types.filter((t) => !keyed.includes(t) && !rated.includes(t));
  if (rest.length > 0 && claimed.length < limit) {
    claimed.push(...(await steps.others(rest, limit - claimed.length)));
  }
  return claimed;
}

/**
 * A key limit's weights as the adapters store them: JSON text of `{ key: weight }` in key order
 * (requireKeyLimits orders them), or null for none.
 */
export function keyWeightsJson(limit: KeyLimit): string | null {
  return limit.weights === undefined ? null : JSON.stringify(limit.weights);
}

/**
 * Stored weights (keyWeightsJson's text) as a claim's KeyWeights, parsed once per text: a type's
 * claims read the same text round after round. Holds the last few texts a store's claims met.
 */
export class KeyWeightsCache {
  readonly #parsed = new Map<string, ReadonlyMap<string, number>>();

  of(text: string | null | undefined): ReadonlyMap<string, number> | undefined {
    if (text === null || text === undefined) return undefined;
    let weights = this.#parsed.get(text);
    if (weights === undefined) {
      if (this.#parsed.size >= 16) this.#parsed.clear();
      weights = new Map(Object.entries(JSON.parse(text) as Record<string, number>));
      this.#parsed.set(text, weights);
    }
    return weights;
  }
}

/** The statements of an adapter's `<table>_key_limits`, given checked input. */
export interface KeyLimitStatements {
  /** Stores the limits (at least one), each replacing its type's, weights as keyWeightsJson gives them. */
  readonly write: (limits: readonly KeyLimit[]) => Promise<unknown>;
  /** Every stored row, its limit as the driver returns it, its weights as stored. */
  readonly read: () => Promise<
    readonly {
      readonly type: string;
      readonly keyField: string;
      readonly maxRunning: number | string;
      readonly weightsJson: string | null;
    }[]
  >;
  /** A keyed claim's reads of `type`, due at `now`, on the store's own connections (outside a claim). */
  readonly reader: (type: string, now: Date) => KeyedClaimReader;
}

/** A KeyLimitStore over the adapter's statements: `write` gets checked limits (at least one). */
export function keyLimitStore(statements: KeyLimitStatements): KeyLimitStore {
  const { write, read } = statements;
  const list = async (): Promise<KeyLimit[]> =>
    (await read()).map((r) => ({
      type: r.type,
      keyField: r.keyField,
      maxRunning: Number(r.maxRunning),
      ...(r.weightsJson === null ? {} : { weights: JSON.parse(r.weightsJson) as Record<string, number> }),
    }));
  return {
    async declare(limits) {
      const checked = requireKeyLimits(limits);
      if (checked.length > 0) await write(checked);
    },
    list,
    async keysWaiting(types, now, top = KEYS_WAITING_TOP) {
      if (!Array.isArray(types)) throw new InvalidArgumentError('types must be an array of command types');
      const checked = (types as unknown[]).map((t) => requireStoredType('keysWaiting', t));
      const most = requireInt('top', top, 1, MAX_KEYS_WAITING_TOP);
      if (!(now instanceof Date) || Number.isNaN(now.getTime())) {
        throw new InvalidArgumentError('now must be a valid Date');
      }
      if (checked.length === 0) return [];
      // A fair-share type is kept as a key limit never reached: no key is ever at it.
      const caps = new Map(
        (await list()).map((l) => [l.type, l.maxRunning >= MAX_KEY_LIMIT ? null : l.maxRunning]),
      );
      const waiting = [];
      for (const type of checked) {
        waiting.push(
          await keysWaitingOf(statements.reader(type, now), {
            type,
            cap: caps.get(type) ?? null,
            top: most,
            nowMs: now.getTime(),
          }),
        );
      }
      return waiting;
    },
  };
}

/**
 * A keyed claim's rows in the order its claim took them: by priority, then turn (the row's rank
 * among this claim's rows of its key, by the key's weight in `weights`), then due time and id. A pool runs its queue in this order,
 * so a claim that took a big key's backlog and a small key's few starts them interleaved. The key
 * is the payload's `keyField` as text (a command without it, or with null there, keys as one).
 */
export function inTurns<Row extends CommandRecord>(
  rows: readonly Row[],
  keyField: string,
  weights?: ReadonlyMap<string, number>,
): Row[] {
  const ordered = [...rows].sort(byClaimOrder);
  const seen = new Map<string, number>();
  const turnOf = new Map<Row, number>();
  for (const row of ordered) {
    const value =
      row.payload !== null && typeof row.payload === 'object'
        ? (row.payload as Record<string, unknown>)[keyField]
        : undefined;
    const keyed = value !== undefined && value !== null && value !== '';
    const key = `${row.priority} ${keyed ? `=${String(value)}` : ''}`;
    const before = seen.get(key) ?? 0;
    seen.set(key, before + 1);
    // A weighted key takes its weight's worth of commands per turn.
    const weight = keyed ? (weights?.get(String(value)) ?? 1) : 1;
    turnOf.set(row, Math.floor(before / weight) + 1);
  }
  return ordered.sort(
    (a, b) => a.priority - b.priority || (turnOf.get(a) ?? 0) - (turnOf.get(b) ?? 0) || byClaimOrder(a, b),
  );
}
