import {
  InvalidArgumentError,
  requireScheduleName,
  ScheduleNotFoundError,
  type CommandStore,
  type ScheduleRecord,
  type ScheduleStore,
} from '@asynccmd/core';
import { parseCron } from '../recurring/cron.js';

/** A recurring schedule as /schedules, `asynccmd schedules list`, stats and the dashboard show it. */
export interface ScheduleView {
  readonly name: string;
  readonly type: string;
  readonly cron: string;
  /** null: UTC. */
  readonly timezone: string | null;
  readonly paused: boolean;
  /** The latest tick enqueued; null before the first. */
  readonly lastTick: string | null;
  /** The next tick after `now`; null while paused (or when the expression has no more). */
  readonly nextTick: string | null;
}

export function toScheduleView(record: ScheduleRecord, now: Date): ScheduleView {
  return {
    name: record.name,
    type: record.type,
    cron: record.cron,
    timezone: record.timezone,
    paused: record.paused,
    lastTick: record.lastTick?.toISOString() ?? null,
    nextTick: record.paused ? null : nextTick(record, now),
  };
}

function nextTick(record: ScheduleRecord, now: Date): string | null {
  try {
    const after = Math.max(now.getTime(), record.lastTick?.getTime() ?? -Infinity);
    return parseCron(record.cron, record.timezone).nextAfter(new Date(after))?.toISOString() ?? null;
  } catch {
    // Declared by a version of the application whose expression this one cannot read.
    return null;
  }
}

/** The stored schedules with their next ticks after `now`; none when the store keeps no schedules. */
export async function readSchedules(store: CommandStore, now: Date): Promise<ScheduleView[]> {
  if (store.schedules === undefined) return [];
  return (await store.schedules.list()).map((r) => toScheduleView(r, now));
}

/**
 * Pauses or resumes a schedule for every instance (the state is the database's). `now` is the
 * application clock: a resume skips the ticks before it.
 */
export async function setSchedulePaused(
  store: CommandStore,
  name: unknown,
  paused: boolean,
  now: Date,
): Promise<ScheduleView> {
  const key = requireScheduleName(name);
  const record = await schedulesOf(store).setPaused(key, paused, now);
  if (record === null) throw new ScheduleNotFoundError(key);
  return toScheduleView(record, now);
}

export function schedulesOf(store: CommandStore): ScheduleStore {
  if (store.schedules === undefined) {
    throw new InvalidArgumentError(`the ${store.dialect} store keeps no recurring schedules`);
  }
  return store.schedules;
}
