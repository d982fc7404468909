import type { CommandHeaders } from '@asynccmd/core';

/** Headers a tick's command carries: the schedule's name and the tick's cron time (ISO 8601, UTC). */
export const SCHEDULE_HEADER = 'asynccmd-schedule';
export const TICK_HEADER = 'asynccmd-tick';

/** Which period a recurring command speaks for: `context.tick` of its execution. */
export interface RecurringTick {
  /** The schedule's name. */
  readonly schedule: string;
  /** The cron time of the tick (not when it was enqueued or runs). */
  readonly at: Date;
}

/** The tick a command was enqueued for, read from its headers; null for an ordinary command. */
export function tickOf(headers: CommandHeaders): RecurringTick | null {
  const schedule = headers[SCHEDULE_HEADER];
  const at = headers[TICK_HEADER];
  if (schedule === undefined || at === undefined) return null;
  const time = new Date(at);
  return Number.isFinite(time.getTime()) ? { schedule, at: time } : null;
}
