import type { Clock, Logger, NewCommand, ScheduleDefinition, ScheduleStore } from '@asynccmd/core';
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

interface Entry {
  readonly schedule: RecurringSchedule;
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
  #declared = false;

  constructor(deps: RecurringDeps, schedules: readonly RecurringSchedule[]) {
    super(
      { operation: 'enqueueTick', intervalMs: RECURRING_LOOK_MS, runOnStart: true, maxOutageDelayMs: 5_000 },
      deps.outage,
    );
    this.#deps = deps;
    this.#entries = schedules.map((schedule) => {
      const timezone = schedule.timezone ?? null;
      return {
        schedule,
        definition: { name: schedule.name, type: schedule.type, cron: schedule.cron, timezone },
        cron: parseCron(schedule.cron, timezone),
        catchUp: schedule.catchUp ?? 'none',
        missedAfterMs: schedule.missedAfterMs ?? DEFAULT_MISSED_AFTER_MS,
        after: new Date(0),
        nextDue: undefined,
      };
    });
  }

  protected async work(signal: AbortSignal): Promise<RunOutcome> {
    const { schedules, clock } = this.#deps;
    const now = clock.now();
    let asked = false;
    if (!this.#declared) {
      await schedules.declare(
        this.#entries.map((e) => e.definition),
        now,
      );
      const stored = new Map((await schedules.list()).map((r) => [r.name, r]));
      for (const entry of this.#entries) {
        const record = stored.get(entry.schedule.name);
        const activeFrom = record ? record.activeFrom.getTime() - 1 : now.getTime();
        entry.after = new Date(Math.max(record?.lastTick?.getTime() ?? -Infinity, activeFrom));
        entry.nextDue = undefined;
      }
      this.#declared = true;
      asked = true;
    }
    let enqueued = 0;
    for (const entry of this.#entries) {
      if (signal.aborted) break;
      if (entry.nextDue === undefined) entry.nextDue = entry.cron.nextAfter(entry.after);
      if (entry.nextDue === null || entry.nextDue.getTime() > now.getTime()) continue;
      asked = true;
      enqueued += await this.#enqueueDue(entry, now);
    }
    if (enqueued > 0) this.#deps.enqueued();
    return asked ? 'done' : 'idle';
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
          // Its row was deleted: declare again at the next look, and go on from there.
          this.#declared = false;
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
