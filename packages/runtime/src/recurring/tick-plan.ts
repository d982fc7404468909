import type { CronTimes } from './cron.js';

/**
 * What happens to the ticks that no instance enqueued in time (every instance was down, or the
 * database was): 'none' skips them, 'latest' enqueues the most recent of them, a number n enqueues
 * the n most recent, oldest first.
 */
export type CatchUpPolicy = 'none' | 'latest' | number;

/** The most ticks one look enqueues for one schedule; the rest wait for the next look. */
export const MAX_TICKS_PER_LOOK = 1_000;

export interface TickPlanInput {
  readonly cron: CronTimes;
  /** Ticks after this (exclusive) are due. */
  readonly after: Date;
  readonly now: Date;
  readonly catchUp: CatchUpPolicy;
  /** A due tick at least this old (now − tick ≥ missedAfterMs) was missed. */
  readonly missedAfterMs: number;
}

export interface TickPlan {
  /** The ticks to enqueue, oldest first. */
  readonly ticks: readonly Date[];
  /**
   * Every tick up to this has been decided (enqueued or skipped by the policy): the next look starts
   * after it. `now` unless the look was cut at MAX_TICKS_PER_LOOK.
   */
  readonly through: Date;
}

/**
 * The ticks of one schedule to enqueue now: every due tick still within `missedAfterMs` (late, not
 * missed), and of the older ones what the catch-up policy says. Pure: the runtime owns the clock.
 */
export function planTicks(input: TickPlanInput): TickPlan {
  const { cron, after, now, catchUp, missedAfterMs } = input;
  if (now.getTime() <= after.getTime()) return { ticks: [], through: after };
  const missedThrough = new Date(now.getTime() - missedAfterMs);
  const missed: Date[] = [];
  if (missedThrough.getTime() > after.getTime() && catchUp !== 'none') {
    const count = catchUp === 'latest' ? 1 : Math.min(catchUp, MAX_TICKS_PER_LOOK);
    for (const t of cron.latestAtOrBefore(count, missedThrough)) {
      if (t.getTime() > after.getTime()) missed.unshift(t);
    }
  }
  const ticks = [...missed];
  let cursor = missedThrough.getTime() > after.getTime() ? missedThrough : after;
  for (;;) {
    const next = cron.nextAfter(cursor);
    if (next === null || next.getTime() > now.getTime()) break;
    if (ticks.length >= MAX_TICKS_PER_LOOK) return { ticks, through: cursor };
    ticks.push(next);
    cursor = next;
  }
  return { ticks, through: now };
}
