import { scheduleNameProblem, LIMITS } from '@asynccmd/core';
import { parseCron } from './cron.js';
import { MAX_TICKS_PER_LOOK, type CatchUpPolicy } from './tick-plan.js';

/**
 * One recurring schedule, declared in code (the runtime's `recurring` option): on every tick of
 * `cron` one command of `type` is submitted — once across all instances sharing the table.
 */
export interface RecurringSchedule {
  /** Names the schedule in the table, the admin API and the CLI: 1 to 128 letters, digits, `_ . : -`. */
  readonly name: string;
  /**
   * When it ticks: 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first,
   * e.g. `0 0 3 * * *` (every day at 03:00:00) or `* * * * * *` (every second).
   */
  readonly cron: string;
  /** IANA time zone the expression is read in, e.g. `Europe/Paris`. Default UTC. */
  readonly timezone?: string;
  /** The command type each tick submits (an executor's type, or one of `submitOnlyTypes`). */
  readonly type: string;
  /** The payload of every tick's command. Give this or `payloadFor`; neither: `null`. */
  readonly payload?: unknown;
  /** The payload of the command of one tick (its cron time). */
  readonly payloadFor?: (tick: Date) => unknown;
  /** Ticks missed while no instance could enqueue them: 'none' (default), 'latest' or how many. */
  readonly catchUp?: CatchUpPolicy;
  /**
   * How late a tick may be enqueued before it counts as missed (and the catch-up policy decides
   * about it). Default 10 s.
   */
  readonly missedAfterMs?: number;
  /** Retries of each tick's command. Default: the executor's, else the runtime's `defaultMaxRetry`. */
  readonly maxRetry?: number;
}

export const DEFAULT_MISSED_AFTER_MS = 10_000;
const MAX_MISSED_AFTER_MS = 7 * 24 * 3_600_000;

type Check = (value: unknown) => string | null;

/** Every field of a schedule with its check (the type makes a new field need one). */
const SCHEDULE_CHECKS: { readonly [K in keyof RecurringSchedule]-?: Check } = {
  name: (v) => scheduleNameProblem(v),
  cron: (v) =>
    typeof v === 'string' && v.length > 0 && v.length <= LIMITS.cronChars
      ? null
      : `must be a cron expression of 1 to ${LIMITS.cronChars} characters`,
  timezone: (v) =>
    typeof v === 'string' && v.length > 0 && v.length <= LIMITS.cronChars
      ? null
      : 'must be an IANA time zone name such as "Europe/Paris"',
  type: (v) =>
    typeof v === 'string' && v.length > 0 && v.length <= 64
      ? null
      : 'must be a command type of 1 to 64 characters',
  payload: () => null,
  payloadFor: (v) => (typeof v === 'function' ? null : 'must be a function (tick: Date) => payload'),
  catchUp: (v) =>
    v === 'none' ||
    v === 'latest' ||
    (typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= MAX_TICKS_PER_LOOK)
      ? null
      : `must be 'none', 'latest' or a whole number from 1 to ${MAX_TICKS_PER_LOOK}`,
  missedAfterMs: (v) =>
    typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_MISSED_AFTER_MS
      ? null
      : `must be a whole number of milliseconds from 0 to ${MAX_MISSED_AFTER_MS}`,
  maxRetry: (v) =>
    typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 1000
      ? null
      : 'must be a whole number from 0 to 1000',
};

/** What is wrong with the `recurring` option, or null: each schedule's fields, and unique names. */
export function recurringProblem(value: unknown): string | null {
  if (!Array.isArray(value)) return 'must be an array of recurring schedules';
  const names = new Set<string>();
  for (const [i, schedule] of value.entries()) {
    const problem = scheduleProblem(schedule);
    if (problem !== null) {
      const name = (schedule as { name?: unknown } | null)?.name;
      return `[${i}]${typeof name === 'string' ? ` "${name.slice(0, 40)}"` : ''}: ${problem}`;
    }
    const { name } = schedule as RecurringSchedule;
    if (names.has(name)) return `[${i}]: the name "${name}" is declared twice`;
    names.add(name);
  }
  return null;
}

export function scheduleProblem(schedule: unknown): string | null {
  if (schedule === null || typeof schedule !== 'object' || Array.isArray(schedule)) {
    return 'must be a schedule ({ name, cron, type, timezone?, payload? | payloadFor?, catchUp?, … })';
  }
  const given = schedule as Record<string, unknown>;
  for (const required of ['name', 'cron', 'type'] as const) {
    if (given[required] === undefined) return `needs \`${required}\``;
  }
  for (const [field, value] of Object.entries(given)) {
    const check = (SCHEDULE_CHECKS as Readonly<Record<string, Check>>)[field];
    if (check === undefined) {
      return `has no field \`${field}\` (fields: ${Object.keys(SCHEDULE_CHECKS).join(', ')})`;
    }
    const problem = value === undefined ? null : check(value);
    if (problem !== null) return `${field} ${problem}`;
  }
  if (given['payload'] !== undefined && given['payloadFor'] !== undefined) {
    return 'takes `payload` or `payloadFor`, not both';
  }
  try {
    parseCron(given['cron'] as string, (given['timezone'] as string | undefined) ?? null);
  } catch (e) {
    return `cron or timezone is not usable: ${e instanceof Error ? e.message.slice(0, 200) : String(e)}`;
  }
  return null;
}
