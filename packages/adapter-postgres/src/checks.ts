import { requireInstant as coreRequireInstant } from '@asynccmd/core';

/*
 * What the claim statements add to core's input checks: PostgreSQL's timestamp text. (The other
 * operations take their checked input from core's store kit and encode it in store.ts.)
 */

/** A time only compared with, clamped into the stored range, as ISO text. */
export function requireInstant(what: string, value: unknown): string {
  return coreRequireInstant(what, value).toISOString();
}
