import { Cron } from 'croner';

/**
 * The few questions the runtime asks of a cron expression, answered by croner: 5 fields (minutes),
 * 6 (seconds first) or 7 (years last), read in an IANA time zone (default UTC). Across a DST change
 * croner decides: a fixed time that falls in the gap runs at the first valid time after it, and a
 * fixed time that occurs twice runs once; expressions with wildcards or steps in seconds, minutes or
 * hours skip the gap and run on both occurrences.
 */
export interface CronTimes {
  /** The first tick strictly after `after`; null when the expression has no more. */
  nextAfter(after: Date): Date | null;
  /** Up to `count` ticks at or before `atOrBefore`, latest first. */
  latestAtOrBefore(count: number, atOrBefore: Date): Date[];
}

/** Parses an expression; throws croner's error (its message says what is wrong) when it is not one. */
export function parseCron(expression: string, timezone: string | null): CronTimes {
  if (timezone !== null) {
    // croner reads the zone only when it computes a time: ask the platform up front.
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  }
  const cron = new Cron(expression, {
    ...(timezone === null ? { timezone: 'Etc/UTC' } : { timezone }),
    mode: '5-or-6-parts',
  });
  const times: CronTimes = {
    nextAfter: (after) => cron.nextRun(after),
    // previousRuns is strictly before its reference (to the millisecond, with a run earlier in the
    // same second included), so a reference 1 ms later includes `atOrBefore` itself.
    latestAtOrBefore: (count, atOrBefore) =>
      count <= 0 ? [] : cron.previousRuns(count, new Date(atOrBefore.getTime() + 1)),
  };
  // An expression that never matches (30 February) or a zone croner cannot use fails here, not at
  // its first tick.
  if (times.nextAfter(new Date()) === null) throw new Error(`"${expression}" never matches a date`);
  return times;
}
