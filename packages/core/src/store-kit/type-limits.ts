import { requireTypeLimits } from '../input-checks.js';
import type { TypeLimit, TypeLimitStore } from '../ports/store.js';

/** The two claims a round with type limits is made of, in the adapter's SQL. */
export interface LimitedClaimSteps<Row> {
  /**
   * In one transaction: lock `type`'s limit row, count its RUNNING commands in a statement that
   * sees every claim committed before the lock was granted, and claim at most
   * min(`max`, limit − running) of it; nothing when the type has no stored limit.
   */
  readonly claimLimited: (type: string, max: number) => Promise<Row[]>;
  /** The claim without limits, of these types, up to `max`. */
  readonly claimOthers: (types: string[], max: number) => Promise<Row[]>;
}

/**
 * A claim round of `types` up to `limit` where `limitedTypes` honour their stored limits: each
 * limited type first, one transaction (one limit-row lock) at a time so two claimers never wait on
 * each other crosswise, then the other types for what is left. Without limited types it is the
 * plain claim, untouched.
 */
export async function claimWithinLimits<Row>(
  types: readonly string[],
  limitedTypes: readonly string[] | undefined,
  limit: number,
  steps: LimitedClaimSteps<Row>,
): Promise<Row[]> {
  const limited = limitedAmong(types, limitedTypes);
  if (limited.length === 0) return steps.claimOthers([...types], limit);
  const claimed: Row[] = [];
  for (const type of [...limited].sort()) {
    if (claimed.length >= limit) return claimed;
    claimed.push(...(await steps.claimLimited(type, limit - claimed.length)));
  }
  const others = types.filter((t) => !limited.includes(t));
  if (others.length > 0 && claimed.length < limit) {
    claimed.push(...(await steps.claimOthers(others, limit - claimed.length)));
  }
  return claimed;
}

/** Of `types`, those in `limitedTypes` (checked names; absent: none), each once and in order. */
export function limitedAmong(
  types: readonly string[],
  limitedTypes: readonly string[] | undefined,
): string[] {
  if (limitedTypes === undefined) return [];
  const limited = new Set(limitedTypes);
  return [...new Set(types.filter((t) => limited.has(t)))];
}

/** The statements of an adapter's `<table>_type_limits`, given checked input. */
export interface TypeLimitStatements {
  /** Stores the limits (at least one), each replacing its type's. */
  readonly write: (limits: readonly TypeLimit[]) => Promise<unknown>;
  /** Every stored row, its limit as the driver returns it. */
  readonly read: () => Promise<readonly { readonly type: string; readonly maxRunning: number | string }[]>;
}

/**
 * A TypeLimitStore over the adapter's two statements: `write` gets checked limits (at least one),
 * `read` every stored row, its limit as the driver returns it.
 */
export function typeLimitStore(
  write: (limits: readonly TypeLimit[]) => Promise<unknown>,
  read: () => Promise<readonly { readonly type: string; readonly maxRunning: number | string }[]>,
): TypeLimitStore {
  return {
    async declare(limits) {
      const checked = requireTypeLimits(limits);
      if (checked.length > 0) await write(checked);
    },
    async list() {
      return (await read()).map((r) => ({ type: r.type, maxRunning: Number(r.maxRunning) }));
    },
  };
}
