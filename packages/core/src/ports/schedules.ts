import { LIMITS } from '../limits.js';
import { AsyncCommandError, InvalidArgumentError } from '../errors.js';
import type { CommandId, NewCommand } from '../command.js';

/**
 * Recurring schedules, as the store keeps them: one row per schedule (its definition, whether it is
 * paused, the latest tick enqueued) in `<table>_schedules`, and the commands of its ticks in the
 * command table, each carrying (schedule, tick) under a permanent unique key. That key, not a lock,
 * is what makes a tick run once however many instances enqueue it: of concurrent `enqueueTick`
 * calls for one tick, exactly one inserts.
 *
 * Times: ticks and `activeFrom` are the application's clock (cron times); the store compares them
 * and never reads its own clock for them.
 */
export interface ScheduleStore {
  /**
   * Creates the rows of schedules not stored yet (not paused, no tick yet, active from `now`) and
   * updates the definition (type, cron, timezone) of those that are; pause state and last tick are
   * kept. Idempotent; safe from several instances at once.
   */
  declare(definitions: readonly ScheduleDefinition[], now: Date): Promise<void>;
  /** Every stored schedule, by name. */
  list(): Promise<ScheduleRecord[]>;
  get(name: string): Promise<ScheduleRecord | null>;
  /**
   * Pauses or resumes a schedule for every instance; null when no such schedule is stored. A resume
   * of a paused schedule makes it active from `now`: ticks that fell in the pause are never enqueued.
   * Pausing a paused (resuming a running) schedule changes nothing.
   */
  setPaused(name: string, paused: boolean, now: Date): Promise<ScheduleRecord | null>;
  /**
   * Inserts the command of one tick, atomically and at most once per (schedule, tick) for the life
   * of the table, unless the schedule is paused, the tick is not after its last tick, or it is before
   * the schedule was (re)activated; then records the tick as the schedule's last. The command is
   * inserted PENDING like any other, plus its (schedule, tick) key.
   */
  enqueueTick(tick: ScheduleTick): Promise<EnqueueTickResult>;
  /** Deletes a schedule's row; the commands of its ticks stay. Returns whether there was one. */
  remove(name: string): Promise<boolean>;
  /**
   * Stores a schedule added at run time (not paused, no tick yet, active from `now`), with how its
   * ticks' commands are made; null when a schedule of that name is stored already (nothing changes).
   * Every instance with an executor for its type enqueues its ticks once it has read it.
   */
  add(
    definition: ScheduleDefinition,
    settings: RunTimeScheduleSettings,
    now: Date,
  ): Promise<ScheduleRecord | null>;
}

/** How the commands of a schedule added at run time are made (code gives these in its declaration). */
export interface RunTimeScheduleSettings {
  /** The payload of every tick's command, as JSON text. */
  readonly payloadJson: string;
  /** Ticks missed while no instance could enqueue them: 'none', 'latest' or how many. */
  readonly catchUp: 'none' | 'latest' | number;
  /** Retries of each tick's command; null: the executor's, else the runtime's default. */
  readonly maxRetry: number | null;
}

/** What a schedule is, as declared in code. */
export interface ScheduleDefinition {
  /** 1 to 128 characters: letters, digits and `_ . : -`. */
  readonly name: string;
  /** The command type each tick submits. */
  readonly type: string;
  /** The cron expression (with or without seconds), as written. */
  readonly cron: string;
  /** IANA time zone the expression is read in; null: UTC. */
  readonly timezone: string | null;
}

export interface ScheduleRecord extends ScheduleDefinition {
  readonly paused: boolean;
  /** The latest tick enqueued; null before the first. */
  readonly lastTick: Date | null;
  /** Ticks before this (its creation, or its latest resume) are never enqueued. */
  readonly activeFrom: Date;
  /** How its commands are made, for a schedule added at run time; null for one declared in code. */
  readonly runTime: RunTimeScheduleSettings | null;
}

export interface ScheduleTick {
  readonly schedule: string;
  /** The cron time this command speaks for (whole milliseconds). */
  readonly tick: Date;
  readonly command: NewCommand;
}

/**
 * enqueued: this call inserted the tick's command. duplicate: the tick's command exists already
 * (another instance enqueued it). paused: the schedule is paused. passed: the tick is not after the
 * schedule's last tick, or before its activation. unknown: no such schedule is stored.
 */
export type EnqueueTickResult =
  | { readonly outcome: 'enqueued'; readonly id: CommandId }
  | { readonly outcome: 'duplicate' | 'paused' | 'passed' | 'unknown' };

/** A schedule of that name is stored already (added at run time or declared in code). */
export class ScheduleExistsError extends AsyncCommandError {
  constructor(readonly schedule: string) {
    super('SCHEDULE_EXISTS', `a schedule named ${JSON.stringify(schedule)} exists already`);
    this.name = 'ScheduleExistsError';
  }
}

/** The schedule is declared in code: its instances would declare it again; remove it from the code. */
export class ScheduleDeclaredInCodeError extends AsyncCommandError {
  constructor(readonly schedule: string) {
    super(
      'SCHEDULE_DECLARED_IN_CODE',
      `schedule ${JSON.stringify(schedule)} is declared in code (the runtime's \`recurring\` option): ` +
        'remove it there, or pause it',
    );
    this.name = 'ScheduleDeclaredInCodeError';
  }
}

/** No schedule of that name is stored. */
export class ScheduleNotFoundError extends AsyncCommandError {
  constructor(readonly schedule: string) {
    super('NOT_FOUND', `schedule ${JSON.stringify(schedule)} does not exist`);
    this.name = 'ScheduleNotFoundError';
  }
}

export const MAX_SCHEDULE_NAME_LENGTH = LIMITS.scheduleNameChars;
/** Characters of a stored cron expression or time zone name. */
export const MAX_CRON_LENGTH = LIMITS.cronChars;

const SCHEDULE_NAME = /^[A-Za-z0-9_.:-]+$/;

/** What is wrong with a schedule name, or null when it is one. */
export function scheduleNameProblem(name: unknown): string | null {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_SCHEDULE_NAME_LENGTH) {
    return `must be a string of 1 to ${MAX_SCHEDULE_NAME_LENGTH} characters`;
  }
  return SCHEDULE_NAME.test(name) ? null : 'may hold only letters, digits and _ . : -';
}

/** Returns `name` when it is a schedule name; throws INVALID_ARGUMENT otherwise. */
export function requireScheduleName(name: unknown): string {
  const problem = scheduleNameProblem(name);
  if (problem !== null) {
    const shown = typeof name === 'string' ? JSON.stringify(name.slice(0, 40)) : typeof name;
    throw new InvalidArgumentError(`schedule name ${shown} ${problem}`);
  }
  return name as string;
}

/** Checks a definition before a store writes it; throws INVALID_ARGUMENT naming the field. */
export function requireScheduleDefinition(d: ScheduleDefinition): ScheduleDefinition {
  requireScheduleName(d.name);
  const text = (what: string, v: unknown, max: number): void => {
    if (typeof v !== 'string' || v.length === 0 || v.length > max || v.includes('\u0000')) {
      throw new InvalidArgumentError(`schedule "${d.name}": ${what} must be 1 to ${max} characters`);
    }
  };
  text('type', d.type, LIMITS.typeChars);
  text('cron', d.cron, MAX_CRON_LENGTH);
  if (d.timezone !== null) text('timezone', d.timezone, MAX_CRON_LENGTH);
  return d;
}
