import { requireScheduleName, ScheduleNotFoundError, type Clock, type CommandStore } from '@asynccmd/core';
import {
  addSchedule,
  readSchedules,
  removeSchedule,
  schedulesOf,
  setSchedulePaused,
  toScheduleView,
  type NewScheduleInput,
  type ScheduleView,
} from '../ops/schedules-view.js';

/** What `runtime.schedules` needs of its runtime beyond the store and the clock. */
export interface RecurringScheduleContext {
  /** The types a schedule may be added for: the runtime's executors' and its submit-only types. */
  readonly knownTypes: () => readonly string[];
  /** The runtime's largest payload, as JSON bytes. */
  readonly maxPayloadBytes: number;
  /** Called after an add or a remove: this instance reads the table again at its next look. */
  readonly changed: () => void;
}

/**
 * `runtime.schedules`: the recurring schedules stored in the table (every instance's, not only this
 * one's); pause / resume, and add / remove of schedules at run time, for all instances at once.
 * Times are the runtime's clock.
 */
export class RecurringSchedules {
  readonly #store: CommandStore;
  readonly #clock: Clock;
  readonly #context: RecurringScheduleContext;

  constructor(store: CommandStore, clock: Clock, context: RecurringScheduleContext) {
    this.#store = store;
    this.#clock = clock;
    this.#context = context;
  }

  /**
   * Stores a schedule for every instance: each one that has an executor for its type enqueues its
   * ticks (exactly one command per tick across them) once it has read it — within
   * RUN_TIME_SCHEDULES_REFRESH_MS (5 s). Rejects with INVALID_ARGUMENT (a bad name, cron, time zone
   * or field), UNKNOWN_COMMAND_TYPE (a type this runtime neither executes nor submits), or
   * SCHEDULE_EXISTS.
   */
  async add(schedule: NewScheduleInput): Promise<ScheduleView> {
    const view = await addSchedule(
      this.#store,
      schedule,
      this.#clock.now(),
      this.#context.knownTypes(),
      this.#context.maxPayloadBytes,
    );
    this.#context.changed();
    return view;
  }

  /**
   * Removes a schedule added at run time: no instance enqueues another tick of it (each finds its
   * row gone at its next tick). NOT_FOUND when there is none; SCHEDULE_DECLARED_IN_CODE for one of
   * the `recurring` option, which its instances would declare again.
   */
  async remove(name: string): Promise<{ name: string; removed: true }> {
    const result = await removeSchedule(this.#store, name);
    this.#context.changed();
    return result;
  }

  /** Every stored schedule with its last and next tick. */
  list(): Promise<ScheduleView[]> {
    return readSchedules(this.#store, this.#clock.now());
  }

  /** One schedule; rejects with NOT_FOUND when none of that name is stored. */
  async get(name: string): Promise<ScheduleView> {
    const key = requireScheduleName(name);
    const record = await schedulesOf(this.#store).get(key);
    if (record === null) throw new ScheduleNotFoundError(key);
    return toScheduleView(record, this.#clock.now());
  }

  /** No instance enqueues its ticks until it is resumed. */
  pause(name: string): Promise<ScheduleView> {
    return setSchedulePaused(this.#store, name, true, this.#clock.now());
  }

  /** Ticks from now on are enqueued again; those that fell in the pause never are. */
  resume(name: string): Promise<ScheduleView> {
    return setSchedulePaused(this.#store, name, false, this.#clock.now());
  }
}
