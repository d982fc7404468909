import {
  COMMAND_STATUSES,
  type CommandStatus,
  type CommandStore,
  type KeyLimit,
  type KeyRateLimit,
  type KeysWaiting,
  type RateLimitState,
  type StatsRow,
  type TypeLimit,
} from '@asynccmd/core';
import { readSchedules, type ScheduleView } from './schedules-view.js';
import { readPausedTypes, type PausedTypeView } from './type-pauses-view.js';

/** Counts by status and by type, and the age of the backlog, as /stats and `asynccmd stats` show them. */
export interface StatsView {
  /** The database clock the view was taken at. */
  readonly now: string;
  readonly total: number;
  /** Every status, zero included, so a dashboard never has to guess whether a key is missing. */
  readonly byStatus: Readonly<Record<CommandStatus, number>>;
  readonly byType: Readonly<Record<string, Readonly<Record<CommandStatus, number>>>>;
  readonly rows: readonly StatsRow[];
  /** nextRunAt of the oldest due PENDING command; null when nothing is waiting. */
  readonly oldestDueAt: string | null;
  /** How long that command has been waiting past its due time, in milliseconds. */
  readonly oldestPendingAgeMs: number | null;
  /** The recurring schedules, with their last and next ticks (next after `now`); empty when none. */
  readonly schedules: readonly ScheduleView[];
  /** The stored type limits (the values every instance's claims enforce); empty when none. */
  readonly typeLimits: readonly TypeLimit[];
  /** The types paused for every instance (their PENDING commands wait); empty when none. */
  readonly pausedTypes: readonly PausedTypeView[];
  /** The stored rate limits, each with the whole tokens its bucket holds now; empty when none. */
  readonly rateLimits: readonly RateLimitState[];
  /** The stored limits of RUNNING commands per key (fair-share types too); empty when none. */
  readonly keyLimits: readonly KeyLimit[];
  /** The stored rate limits per key; empty when none. */
  readonly keyRateLimits: readonly KeyRateLimit[];
  /**
   * For each type of `keyLimits` and `keyRateLimits`, its keys with due PENDING commands: how many,
   * how many at their key limit, and the 10 with the most RUNNING.
   */
  readonly keysWaiting: readonly KeysWaiting[];
}

export function zeroCounts(): Record<CommandStatus, number> {
  return Object.fromEntries(COMMAND_STATUSES.map((s) => [s, 0])) as Record<CommandStatus, number>;
}

/**
 * Reads the stats on the database clock: the ops process may run on a machine whose clock nobody
 * watches, while every instance's leases are judged by the database's.
 */
export async function readStats(store: CommandStore): Promise<StatsView> {
  const now = await store.now();
  const [stats, schedules, typeLimits, pausedTypes, rateLimits, keyLimits, keyRateLimits] = await Promise.all(
    [
      store.stats(now),
      readSchedules(store, now),
      store.typeLimits?.list() ?? [],
      readPausedTypes(store),
      store.rateLimits?.list() ?? [],
      store.keyLimits?.list() ?? [],
      store.keyRateLimits?.list() ?? [],
    ],
  );
  const keyed = [...new Set([...keyLimits, ...keyRateLimits].map((l) => l.type))].sort();
  const keysWaiting = keyed.length === 0 ? [] : ((await store.keyLimits?.keysWaiting(keyed, now)) ?? []);
  const byStatus = zeroCounts();
  const byType: Record<string, Record<CommandStatus, number>> = {};
  let total = 0;
  for (const row of stats.counts) {
    byStatus[row.status] += row.count;
    (byType[row.type] ??= zeroCounts())[row.status] += row.count;
    total += row.count;
  }
  return {
    now: now.toISOString(),
    total,
    byStatus,
    byType,
    rows: stats.counts,
    oldestDueAt: stats.oldestDueAt?.toISOString() ?? null,
    oldestPendingAgeMs:
      stats.oldestDueAt === null ? null : Math.max(0, now.getTime() - stats.oldestDueAt.getTime()),
    schedules,
    typeLimits,
    pausedTypes,
    rateLimits,
    keyLimits,
    keyRateLimits,
    keysWaiting,
  };
}
