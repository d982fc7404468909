import type { CommandStore, Logger } from '@asynccmd/core';
import type { HealthReport } from '../health.js';
import { readStats, type StatsView } from '../stats-view.js';
import { toStatusListItem, type CommandStatusListItem } from '../status-resource.js';
import { createOutcomeWindow, type OutcomeSeries } from './outcome-window.js';

/** A recurring schedule and its next tick, as the dashboard lists them. */
export interface ScheduleSummary {
  readonly name: string;
  readonly type: string;
  /** The next tick; null while paused. */
  readonly nextRunAt: string | null;
  /** The latest tick enqueued; null before the first. */
  readonly lastTick: string | null;
  readonly paused: boolean;
}

/** What every open dashboard page shows and refreshes: one answer shared by all of them. */
export interface DashboardSummary {
  /** When it was read (application clock). */
  readonly generatedAt: string;
  /** How often pages should ask again: the server reads the store no more often than that. */
  readonly refreshMs: number;
  readonly health: HealthReport;
  /** null when the database could not be read. */
  readonly stats: StatsView | null;
  /** The newest dead letters (with lastError); `more` when there are others. */
  readonly deadLetters: { readonly items: readonly CommandStatusListItem[]; readonly more: boolean } | null;
  readonly outcomes: OutcomeSeries | null;
  /** Recurring schedules and their next ticks: empty while the runtime has none. */
  readonly schedules: readonly ScheduleSummary[];
  /** Whether the store keeps type pauses: the page offers Pause / Resume only where it does. */
  readonly typePauses: boolean;
}

export interface SummarySources {
  readonly store: CommandStore;
  readonly health: () => Promise<HealthReport>;
  readonly linkBase: string;
  readonly logger: Logger;
  readonly refreshMs: number;
  readonly windowMs: number;
  readonly bucketMs: number;
  readonly deadLetterLimit: number;
}

/** Reads one summary; a part the database cannot answer is null, and the rest is still shown. */
export function createSummaryReader(s: SummarySources): () => Promise<DashboardSummary> {
  const outcomes = createOutcomeWindow(s.store, s.windowMs, s.bucketMs);
  let failing = false;
  const part = <T>(work: Promise<T>): Promise<T | null> =>
    work.then(
      (value) => value,
      (err: unknown) => {
        // Once per outage, not once per refresh: health reports the outage itself.
        if (!failing) s.logger.warn({ err }, 'asynccmd dashboard: the summary could not be read');
        failing = true;
        return null;
      },
    );
  return async () => {
    const generatedAt = new Date().toISOString();
    const [health, stats, dead] = await Promise.all([
      s.health(),
      part(readStats(s.store)),
      part(s.store.list({ status: 'DEAD', limit: s.deadLetterLimit })),
    ]);
    const series = stats === null ? null : await part(outcomes.read(new Date(stats.now)));
    if (stats !== null && dead !== null && series !== null) failing = false;
    return {
      generatedAt,
      refreshMs: s.refreshMs,
      health,
      stats,
      deadLetters:
        dead === null
          ? null
          : { items: dead.items.map((c) => toStatusListItem(c, s.linkBase)), more: dead.nextCursor !== null },
      outcomes: series,
      schedules: (stats?.schedules ?? []).map((sc) => ({
        name: sc.name,
        type: sc.type,
        nextRunAt: sc.nextTick,
        lastTick: sc.lastTick,
        paused: sc.paused,
      })),
      typePauses: s.store.typePauses !== undefined,
    };
  };
}

export interface SharedSummary {
  /** The latest summary; the first call after a quiet spell waits for a fresh one. */
  current(): Promise<DashboardSummary>;
}

/**
 * One reader for every page: while someone asks, the summary is read once per `refreshMs` on a
 * timer of its own, whatever the number of pages asking; each page gets the latest one. Once nobody
 * has asked for `idleMs`, the timer stops, and the store is not read at all.
 */
export function shareSummary(
  read: () => Promise<DashboardSummary>,
  refreshMs: number,
  idleMs: number,
  now: () => number = () => performance.now(),
): SharedSummary {
  let latest: DashboardSummary | null = null;
  let reading: Promise<DashboardSummary> | null = null;
  let running = false;
  let askedAt = 0;

  const refresh = (): Promise<DashboardSummary> =>
    (reading ??= read()
      .then((summary) => {
        latest = summary;
        return summary;
      })
      .finally(() => {
        reading = null;
      }));

  const schedule = (): void => {
    setTimeout(tick, refreshMs).unref();
  };

  function tick(): void {
    if (now() - askedAt > idleMs) {
      running = false;
      return;
    }
    refresh().then(schedule, schedule);
  }

  return {
    current() {
      askedAt = now();
      if (!running) {
        // Nobody asked for a while: what was read then is stale, so this caller waits for a fresh one.
        running = true;
        const fresh = refresh();
        fresh.then(schedule, schedule);
        return fresh;
      }
      return latest === null ? refresh() : Promise.resolve(latest);
    },
  };
}
