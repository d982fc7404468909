import {
  InvalidArgumentError,
  requireScheduleName,
  ScheduleDeclaredInCodeError,
  ScheduleExistsError,
  ScheduleNotFoundError,
  serialisePayload,
  UnknownCommandTypeError,
  type CommandStore,
  type RunTimeScheduleSettings,
  type ScheduleDefinition,
  type ScheduleRecord,
  type ScheduleStore,
  LIMITS,
} from '@asynccmd/core';
import * as E from 'fp-ts/lib/Either.js';
import { parseCron } from '../recurring/cron.js';
import { scheduleProblem } from '../recurring/recurring-options.js';
import type { CatchUpPolicy } from '../recurring/tick-plan.js';

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
  /** 'code': declared in a runtime's `recurring` option; 'runtime': added at run time (removable). */
  readonly origin: 'code' | 'runtime';
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
    origin: record.runTime === null ? 'code' : 'runtime',
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

/** A schedule to add at run time, as the API, the CLI and the admin HTTP API take it. */
export interface NewScheduleInput {
  readonly name: string;
  /** 5 fields, or 6 with seconds first. */
  readonly cron: string;
  /** IANA time zone; default UTC. */
  readonly timezone?: string;
  readonly type: string;
  /** The payload of every tick's command (the tick's time is in its headers: `context.tick`). Default null. */
  readonly payload?: unknown;
  readonly catchUp?: CatchUpPolicy;
  readonly maxRetry?: number;
}

const NEW_SCHEDULE_FIELDS = ['name', 'cron', 'timezone', 'type', 'payload', 'catchUp', 'maxRetry'];

/**
 * Checks a schedule to add: its fields as a declaration in code would be checked (cron and time
 * zone read by the same parser), its type among `knownTypes` when those are known (null: the CLI,
 * which cannot know which types some instance runs), its payload JSON within `maxPayloadBytes`.
 */
export function parseNewSchedule(
  input: unknown,
  knownTypes: readonly string[] | null,
  maxPayloadBytes: number = LIMITS.defaultPayloadBytes,
): { definition: ScheduleDefinition; settings: RunTimeScheduleSettings } {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new InvalidArgumentError('a new schedule must be an object { name, cron, type, … }');
  }
  const given = input as Record<string, unknown>;
  const extra = Object.keys(given).find((k) => !NEW_SCHEDULE_FIELDS.includes(k));
  if (extra !== undefined) {
    throw new InvalidArgumentError(
      `a new schedule has no field ${JSON.stringify(extra.slice(0, 40))} (fields: ${NEW_SCHEDULE_FIELDS.join(', ')})`,
    );
  }
  requireScheduleName(given['name']);
  const problem = scheduleProblem(given);
  if (problem !== null)
    throw new InvalidArgumentError(`schedule ${JSON.stringify(given['name'])}: ${problem}`);
  const s = given as unknown as NewScheduleInput;
  if (knownTypes !== null && !knownTypes.includes(s.type))
    throw new UnknownCommandTypeError(s.type, knownTypes);
  const serialised = serialisePayload(s.payload ?? null, maxPayloadBytes);
  if (E.isLeft(serialised)) throw serialised.left;
  const payloadJson = serialised.right;
  return {
    definition: { name: s.name, type: s.type, cron: s.cron, timezone: s.timezone ?? null },
    settings: { payloadJson, catchUp: s.catchUp ?? 'none', maxRetry: s.maxRetry ?? null },
  };
}

/** Adds a schedule at run time for every instance; SCHEDULE_EXISTS when its name is taken. */
export async function addSchedule(
  store: CommandStore,
  input: unknown,
  now: Date,
  knownTypes: readonly string[] | null,
  maxPayloadBytes?: number,
): Promise<ScheduleView> {
  const { definition, settings } = parseNewSchedule(input, knownTypes, maxPayloadBytes);
  const record = await schedulesOf(store).add(definition, settings, now);
  if (record === null) throw new ScheduleExistsError(definition.name);
  return toScheduleView(record, now);
}

/**
 * Removes a schedule added at run time: no instance enqueues its ticks any more (the commands of
 * past ticks stay). One declared in code is refused: its instances would declare it again.
 */
export async function removeSchedule(
  store: CommandStore,
  name: unknown,
): Promise<{ name: string; removed: true }> {
  const key = requireScheduleName(name);
  const schedules = schedulesOf(store);
  const record = await schedules.get(key);
  if (record === null) throw new ScheduleNotFoundError(key);
  if (record.runTime === null) throw new ScheduleDeclaredInCodeError(key);
  if (!(await schedules.remove(key))) throw new ScheduleNotFoundError(key);
  return { name: key, removed: true };
}
