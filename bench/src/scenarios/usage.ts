import { BENCH_TYPE } from '../protocol.js';

/**
 * Drains with a feature of the command table in use, set on the seeded backlog by one UPDATE (the
 * seed itself stays the baselines' raw insert): priorities spread over PRIORITY_LEVELS values, or
 * ordering keys spread over ORDERING_KEYS keys (each key's commands then run one after another); or
 * a type limit of TYPE_LIMIT on the drained type, set by the consumers' runtime option, so large it
 * never holds a claim back: what it costs is its lock and count on every claim.
 */
export type FeatureUsage = 'priorities' | 'ordering keys' | 'type limit';

/** Every usage with its row key, in the order the rows are reported. */
export const FEATURE_USAGES = [
  ['priorities', 'priorities'],
  ['ordering keys', 'ordering-keys'],
  ['type limit', 'type-limit'],
] as const satisfies readonly (readonly [FeatureUsage, string])[];

export type FeatureUsageKey = (typeof FEATURE_USAGES)[number][1];

export const PRIORITY_LEVELS = 10;
export const ORDERING_KEYS = 200;
export const TYPE_LIMIT = 10_000;

/** The `typeLimit` a consumer's runtime takes with `usage` (undefined: none). */
export function usageTypeLimit(usage: FeatureUsage | undefined): number | undefined {
  return usage === 'type limit' ? TYPE_LIMIT : undefined;
}

/** The settings text of a drain row with `usage` (its executor runs ASYNC_POOL, as the defaults row's). */
export function usageSettings(usage: FeatureUsage): string {
  return `executor mode ASYNC_POOL; ${usageDescription(usage)}`;
}

/** What the row does with `usage`, on top of the runtime's defaults. */
function usageDescription(usage: FeatureUsage): string {
  if (usage === 'type limit') {
    return `runtime defaults and typeLimits { '${BENCH_TYPE}': ${TYPE_LIMIT} }: never reached, every claim locks the type's limit row and counts its RUNNING commands first`;
  }
  return usage === 'priorities'
    ? `runtime defaults; backlog spread over priorities 0–${PRIORITY_LEVELS - 1} (priority = id mod ${PRIORITY_LEVELS})`
    : `runtime defaults; backlog spread over ${ORDERING_KEYS} ordering keys (key = id mod ${ORDERING_KEYS}): each key's commands one at a time, a freed key waits for the next claim round`;
}

/**
 * The UPDATE that puts `usage` on the table `table`, with `concat` joining SQL text (dialects
 * differ); null when the usage is not in the table (a type limit is the consumers' option).
 */
export function usageUpdate(
  table: string,
  usage: FeatureUsage | undefined,
  concat: (a: string, b: string) => string,
): string | null {
  if (usage === undefined || usage === 'type limit') return null;
  return usage === 'priorities'
    ? `UPDATE ${table} SET priority = id % ${PRIORITY_LEVELS}`
    : `UPDATE ${table} SET ordering_key = ${concat(`'key-'`, `id % ${ORDERING_KEYS}`)}`;
}
