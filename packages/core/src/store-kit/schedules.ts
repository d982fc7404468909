import {
  type EnqueueTickResult,
  type RunTimeScheduleSettings,
  type ScheduleDefinition,
  type ScheduleRecord,
} from '../ports/schedules.js';

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

/** The settings of a run-time schedule as the schedules table stores them (a JSON text column). */
export function encodeRunTimeSettings(settings: RunTimeScheduleSettings): string {
  return JSON.stringify({
    payloadJson: settings.payloadJson,
    catchUp: settings.catchUp,
    maxRetry: settings.maxRetry,
  });
}

/**
 * The settings read back from the table; null for a schedule declared in code (NULL), and for text
 * this version cannot read (written by hand): such a schedule is listed but never ticks here.
 */
export function decodeRunTimeSettings(text: string | null): RunTimeScheduleSettings | null {
  if (text === null) return null;
  try {
    const v = JSON.parse(text) as { payloadJson?: unknown; catchUp?: unknown; maxRetry?: unknown };
    const catchUpOk = v.catchUp === 'none' || v.catchUp === 'latest' || Number.isSafeInteger(v.catchUp);
    const maxRetryOk = v.maxRetry === null || Number.isSafeInteger(v.maxRetry);
    if (typeof v.payloadJson !== 'string' || !catchUpOk || !maxRetryOk) return null;
    return {
      payloadJson: v.payloadJson,
      catchUp: v.catchUp as RunTimeScheduleSettings['catchUp'],
      maxRetry: v.maxRetry as number | null,
    };
  } catch {
    return null;
  }
}

/**
 * The bound values of a run-time schedule's INSERT (its definition checked by checkedStore): name,
 * type, cron, timezone, the activation time as the adapter stores times, the settings' JSON.
 */
export function runTimeScheduleValues<T>(
  definition: ScheduleDefinition,
  settings: RunTimeScheduleSettings,
  activeFrom: T,
): [string, string, string, string | null, T, string] {
  const d = definition;
  return [d.name, d.type, d.cron, d.timezone, activeFrom, encodeRunTimeSettings(settings)];
}
