import { requireScheduleName, ScheduleNotFoundError, type Clock, type CommandStore } from '@asynccmd/core';
import {
  readSchedules,
  schedulesOf,
  setSchedulePaused,
  toScheduleView,
  type ScheduleView,
} from '../ops/schedules-view.js';

/**
 * `runtime.schedules`: the recurring schedules stored in the table (every instance's, not only this
 * one's), and pause / resume for all instances at once. Times are the runtime's clock.
 */
export class RecurringSchedules {
  readonly #store: CommandStore;
  readonly #clock: Clock;

  constructor(store: CommandStore, clock: Clock) {
    this.#store = store;
    this.#clock = clock;
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
