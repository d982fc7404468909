import type {
  Clock,
  Logger,
  NewCommand,
  ScheduleDefinition,
  ScheduleRecord,
  ScheduleStore,
} from '@asynccmd/core';
import type { CommandEvents } from '../command-events.js';
import { PeriodicService, type RunOutcome } from '../services/periodic-service.js';
import type { StoreOutage } from '../store-outage.js';
import { toNewCommand, type SubmitRules } from '../submit-validation.js';
import { parseCron, type CronTimes } from './cron.js';
import { DEFAULT_MISSED_AFTER_MS, type RecurringSchedule } from './recurring-options.js';
import { TICK_HEADER, SCHEDULE_HEADER } from './tick.js';
import { planTicks, type CatchUpPolicy } from './tick-plan.js';

/** How often an instance looks whether a tick is due: a look asks the store only when one is. */
export const RECURRING_LOOK_MS = 250;
/**
 * How often an instance re-reads the schedules table for schedules added or removed at run time:
 * one is picked up within this (its ticks until then are late, not missed: DEFAULT_MISSED_AFTER_MS
 * is longer). A removal takes effect at once: the next tick's insert finds no row.
 */
export const RUN_TIME_SCHEDULES_REFRESH_MS = 5_000;

interface Entry {
  readonly schedule: RecurringSchedule;
  /** The stored row it was made from, for a schedule added at run time; null: declared in code. */
  readonly stored: ScheduleRecord | null;
  readonly definition: ScheduleDefinition;
  readonly cron: CronTimes;
  readonly catchUp: CatchUpPolicy;
  readonly missedAfterMs: number;
  /** Every tick up to this is decided (by this instance or, as the store said, another). */
  after: Date;
  /** The first tick after `after`, once computed; null: the expression has no more. */
  nextDue: Date | null | undefined;
}

export interface RecurringDeps {
  readonly schedules: ScheduleStore;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly events: CommandEvents;
  readonly outage: StoreOutage;
  /** The client's rules: each tick's command is checked as a submit would be. */
  readonly rules: SubmitRules;
  /** Called after a look enqueued commands: wake the poll loops. */
  readonly enqueued: () => void;
  /** Whether this instance has an executor for a type: it runs the run-time schedules of those only. */
  readonly runs: (type: string) => boolean;
}

/**
 * Enqueues the ticks of the runtime's `recurring` schedules. Every instance runs one, and all of
 * them enqueue every tick: the store inserts each (schedule, tick) once (its unique key), so no
 * instance has to be the leader and any of them may stop. At start it declares the schedules and
 * reads where each left off (its last tick), then applies the catch-up policy to the ticks missed.
 */
export class RecurringService extends PeriodicService {
  readonly #deps: RecurringDeps;
  readonly #entries: Entry[];
  readonly #codeNames: ReadonlySet<string>;
  #declared = false;
  /** When the table was last read for run-time schedules (ms of the runtime's clock). */
  #refreshedAt = -Infinity;
  /** Run-time schedules this instance cannot run (a bad stored expression), logged once each. */
  readonly #unusable = new Set<string>();

  constructor(deps: RecurringDeps, schedules: readonly RecurringSchedule[]) {
    super(
      { operation: 'enqueueTick', intervalMs: RECURRING_LOOK_MS, runOnStart: true, maxOutageDelayMs: 5_000 },
      deps.outage,
    );
    this.#deps = deps;
    this.#entries = schedules.map((schedule) => entryOf(schedule, null));
    this.#codeNames = new Set(schedules.map((s) => s.name));
  }

  /** Reads the table for run-time schedules at the next look (after an add or remove here). */
  refreshSoon(): void {
    this.#refreshedAt = -Infinity;
  }

  protected async work(signal: AbortSignal): Promise<RunOutcome> {
    const { schedules, clock } = this.#deps;
    const now = clock.now();
    let asked = false;
    if (!this.#declared) {
      await schedules.declare(
        this.#entries.filter((e) => e.stored === null).map((e) => e.definition),
        now,
      );
      this.#declared = true;
      this.#refreshedAt = -Infinity;
    }
    if (now.getTime() - this.#refreshedAt >= RUN_TIME_SCHEDULES_REFRESH_MS) {
      this.#refresh(await schedules.list(), now);
      asked = true;
    }
    let enqueued = 0;
    for (const entry of [...this.#entries]) {
      if (signal.aborted) break;
      if (entry.nextDue === undefined) entry.nextDue = entry.cron.nextAfter(entry.after);
      if (entry.nextDue === null || entry.nextDue.getTime() > now.getTime()) continue;
      asked = true;
      enqueued += await this.#enqueueDue(entry, now);
    }
    if (enqueued > 0) this.#deps.enqueued();
    return asked ? 'done' : 'idle';
  }

  /**
   * Takes the table as it stands: where each code schedule left off (at start, or after its row was
   * deleted), and the run-time schedules of this instance's types — new ones added, removed or
   * redefined ones dropped.
   */
  #refresh(records: readonly ScheduleRecord[], now: Date): void {
    this.#refreshedAt = now.getTime();
    const stored = new Map(records.map((r) => [r.name, r]));
    const startAfter = (record: ScheduleRecord | undefined): Date => {
      const activeFrom = record ? record.activeFrom.getTime() - 1 : now.getTime();
      return new Date(Math.max(record?.lastTick?.getTime() ?? -Infinity, activeFrom));
    };
    for (let i = this.#entries.length - 1; i >= 0; i--) {
      const entry = this.#entries[i] as Entry;
      if (entry.stored === null) {
        if (entry.after.getTime() === 0) {
          entry.after = startAfter(stored.get(entry.schedule.name));
          entry.nextDue = undefined;
        }
        continue;
      }
      const record = stored.get(entry.schedule.name);
      if (record?.runTime === null || record === undefined || !sameDefinition(record, entry.stored)) {
        this.#entries.splice(i, 1);
      }
    }
    const running = new Set(this.#entries.map((e) => e.schedule.name));
    for (const record of records) {
      if (record.runTime === null || running.has(record.name) || this.#codeNames.has(record.name)) continue;
      if (!this.#deps.runs(record.type)) continue;
      try {
        const entry = entryOf(runTimeSchedule(record), record);
        entry.after = startAfter(record);
        this.#entries.push(entry);
        this.#unusable.delete(record.name);
      } catch (err) {
        if (!this.#unusable.has(record.name)) {
          this.#unusable.add(record.name);
          this.#deps.logger.error(
            { err, schedule: record.name },
            'asynccmd: a schedule added at run time cannot run on this instance; it is skipped',
          );
        }
      }
    }
  }

  /** Enqueues what the plan says for one schedule; returns how many commands it inserted. */
  async #enqueueDue(entry: Entry, now: Date): Promise<number> {
    const { schedules, logger, events } = this.#deps;
    const plan = planTicks({
      cron: entry.cron,
      after: entry.after,
      now,
      catchUp: entry.catchUp,
      missedAfterMs: entry.missedAfterMs,
    });
    const name = entry.schedule.name;
    let inserted = 0;
    for (const tick of plan.ticks) {
      const command = this.#commandOf(entry, tick);
      if (command !== null) {
        const result = await schedules.enqueueTick({ schedule: name, tick, command });
        if (result.outcome === 'unknown') {
          if (entry.stored !== null) {
            // Removed at run time: no more ticks here (nor anywhere: every insert finds no row).
            this.#entries.splice(this.#entries.indexOf(entry), 1);
            return inserted;
          }
          // Its row was deleted: declare again at the next look, and go on from there.
          this.#declared = false;
          entry.after = new Date(0);
          return inserted;
        }
        if (result.outcome === 'paused') break;
        if (result.outcome === 'enqueued') {
          inserted += 1;
          logger.debug(
            { schedule: name, tick: tick.toISOString(), commandId: result.id },
            'asynccmd: tick enqueued',
          );
          events.emit({ kind: 'submitted', id: result.id, type: command.type, duplicate: false });
        }
      }
      // Progress per tick: if the store fails on the next one, the next look goes on from here.
      entry.after = tick;
      entry.nextDue = undefined;
    }
    entry.after = plan.through;
    entry.nextDue = undefined;
    return inserted;
  }

  /** The command of one tick, checked like a submit; null (logged) when its payload cannot be made. */
  #commandOf(entry: Entry, tick: Date): NewCommand | null {
    const { schedule } = entry;
    try {
      const payload = schedule.payloadFor ? schedule.payloadFor(new Date(tick)) : (schedule.payload ?? null);
      return toNewCommand({ ...this.#deps.rules, headers: () => ({}) }, schedule.type, payload, {
        runAt: tick,
        ...(schedule.maxRetry !== undefined ? { maxRetry: schedule.maxRetry } : {}),
        headers: { [SCHEDULE_HEADER]: schedule.name, [TICK_HEADER]: tick.toISOString() },
      });
    } catch (err) {
      this.#deps.logger.error(
        { err, schedule: schedule.name, tick: tick.toISOString() },
        'asynccmd: the command of a recurring tick could not be made; the tick is skipped',
      );
      return null;
    }
  }
}

function entryOf(schedule: RecurringSchedule, stored: ScheduleRecord | null): Entry {
  const timezone = schedule.timezone ?? null;
  return {
    schedule,
    stored,
    definition: { name: schedule.name, type: schedule.type, cron: schedule.cron, timezone },
    cron: parseCron(schedule.cron, timezone),
    catchUp: schedule.catchUp ?? 'none',
    missedAfterMs: schedule.missedAfterMs ?? DEFAULT_MISSED_AFTER_MS,
    after: new Date(0),
    nextDue: undefined,
  };
}

/** A run-time schedule's row as the declaration code would have written. */
function runTimeSchedule(record: ScheduleRecord): RecurringSchedule {
  const settings = record.runTime;
  if (settings === null) throw new Error(`schedule "${record.name}" is declared in code`);
  return {
    name: record.name,
    cron: record.cron,
    type: record.type,
    ...(record.timezone !== null ? { timezone: record.timezone } : {}),
    payload: JSON.parse(settings.payloadJson) as unknown,
    catchUp: settings.catchUp,
    ...(settings.maxRetry !== null ? { maxRetry: settings.maxRetry } : {}),
  };
}

function sameDefinition(a: ScheduleRecord, b: ScheduleRecord): boolean {
  return (
    a.type === b.type &&
    a.cron === b.cron &&
    a.timezone === b.timezone &&
    JSON.stringify(a.runTime) === JSON.stringify(b.runTime)
  );
}
