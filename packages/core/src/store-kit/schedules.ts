import type { EnqueueTickResult, ScheduleRecord } from '../ports/schedules.js';

/**
 * Why a tick is not to be enqueued, judged inside the enqueueing transaction from the schedule's
 * row as it stands there; null when it is to be inserted. A tick is passed when it is not after the
 * last one enqueued, or falls before the schedule became active (declared or resumed).
 */
export function tickRefusal(schedule: ScheduleRecord | null, tick: Date): EnqueueTickResult | null {
  if (schedule === null) return { outcome: 'unknown' };
  if (schedule.paused) return { outcome: 'paused' };
  const ms = tick.getTime();
  if (
    (schedule.lastTick !== null && ms <= schedule.lastTick.getTime()) ||
    ms < schedule.activeFrom.getTime()
  ) {
    return { outcome: 'passed' };
  }
  return null;
}
