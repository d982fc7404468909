/**
 * Drains with a feature of the command table in use, set on the seeded backlog by one UPDATE (the
 * seed itself stays the baselines' raw insert): priorities spread over PRIORITY_LEVELS values, or
 * ordering keys spread over ORDERING_KEYS keys (each key's commands then run one after another).
 */
export type FeatureUsage = 'priorities' | 'ordering keys';

export const PRIORITY_LEVELS = 10;
export const ORDERING_KEYS = 200;

/** The settings text of a drain row with `usage`. */
export function usageSettings(usage: FeatureUsage): string {
  return usage === 'priorities'
    ? `runtime defaults; backlog spread over priorities 0–${PRIORITY_LEVELS - 1} (priority = id mod ${PRIORITY_LEVELS})`
    : `runtime defaults; backlog spread over ${ORDERING_KEYS} ordering keys (key = id mod ${ORDERING_KEYS}): each key's commands one at a time, a freed key waits for the next claim round`;
}

/** The UPDATE that puts `usage` on the table `table`, with `concat` joining SQL text (dialects differ). */
export function usageUpdate(
  table: string,
  usage: FeatureUsage,
  concat: (a: string, b: string) => string,
): string {
  return usage === 'priorities'
    ? `UPDATE ${table} SET priority = id % ${PRIORITY_LEVELS}`
    : `UPDATE ${table} SET ordering_key = ${concat(`'key-'`, `id % ${ORDERING_KEYS}`)}`;
}
