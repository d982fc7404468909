import {
  describeFailure,
  InvalidArgumentError,
  silentLogger,
  type CleanupHorizon,
  type CommandStore,
  type HealthProbe,
  type Logger,
} from '@asynccmd/core';
import { performance } from 'node:perf_hooks';
import { formatDuration } from './duration.js';

export interface HealthOptions {
  /**
   * DOWN while any dead letter exists (a command that exhausted its retries must be seen,
   * and swallowing it silently is worse than alerting). Default true.
   */
  readonly deadLettersDown?: boolean;
  /** DOWN when the oldest due PENDING command has waited longer than this; null disables. Default 15 min. */
  readonly maxPendingAgeMs?: number | null;
  /** A database that does not answer within this is unreachable. Default 5 s. */
  readonly timeoutMs?: number;
  /**
   * How long one answer serves every caller of the admin handler's /health (probes of every
   * replica, a dashboard, an attacker). Callers arriving while it is computed wait for that same
   * answer, also with 0. Default 1 s.
   */
  readonly cacheMs?: number;
  /**
   * A warning (never DOWN) once something has kept the database from cleaning up the command
   * table's dead rows for longer than this (a long transaction elsewhere, where the store can
   * tell: PostgreSQL, MySQL/MariaDB); null disables. Default 1 min.
   */
  readonly maxCleanupHoldMs?: number | null;
}

export const DEFAULT_MAX_PENDING_AGE_MS = 15 * 60_000;
export const DEFAULT_MAX_CLEANUP_HOLD_MS = 60_000;
const DEFAULT_TIMEOUT_MS = 5_000;
const DEFAULT_CACHE_MS = 1_000;
/** Dead letters are counted up to this many: enough to tell "one" from "a flood", and still cheap. */
export const HEALTH_DEAD_LETTER_LIMIT = 100;

export type HealthReasonCode = 'DATABASE_UNREACHABLE' | 'DEAD_LETTERS' | 'BACKLOG_TOO_OLD';

export interface HealthReason {
  /** Stable, for alerts to branch on. */
  readonly code: HealthReasonCode;
  /** Generic words, safe to show anyone. */
  readonly message: string;
  /**
   * The database's own words (they can name hosts, users and tables): for the log and for callers
   * with the admin token only; `publicHealthReport` drops it.
   */
  readonly detail?: string;
}

/** Worth an operator's attention, never a reason for DOWN. */
export interface HealthWarning {
  readonly code: 'CLEANUP_HELD';
  /** Generic words, safe to show anyone. */
  readonly message: string;
  /** Who holds it, in the database's words: the log and callers with the token only. */
  readonly detail?: string;
}

export interface HealthReport {
  readonly status: 'UP' | 'DOWN';
  /** Why it is DOWN; empty when UP. */
  readonly reasons: readonly HealthReason[];
  readonly checks: {
    readonly database: 'UP' | 'DOWN';
    /** Counted up to HEALTH_DEAD_LETTER_LIMIT; null when the database could not be read. */
    readonly deadLetters: number | null;
    readonly oldestPendingAgeMs: number | null;
    /**
     * How many types are paused for every instance: a pause is an operator's decision, so it never
     * makes the report DOWN. null when they could not be read.
     */
    readonly pausedTypes: number | null;
    /**
     * How long the oldest transaction, snapshot or slot has kept the database from cleaning up
     * dead rows (0: nothing holds it); null where the store cannot tell or it could not be read.
     */
    readonly cleanupHeldForMs: number | null;
    /** Dead row versions not cleaned up yet (see CleanupHorizon.deadRows); null when unknown. */
    readonly deadRows: number | null;
  };
  /** Empty when nothing needs attention. */
  readonly warnings: readonly HealthWarning[];
  /**
   * The paused types by name, for the log and callers with the token (public health names no
   * type); `publicHealthReport` drops it.
   */
  readonly pausedTypes?: readonly string[];
  /** When this answer was computed (application clock): a cached answer says how old it is. */
  readonly checkedAt: string;
}

interface HealthSettings {
  readonly deadLettersDown: boolean;
  readonly maxPendingAgeMs: number | null;
  readonly timeoutMs: number;
  readonly cacheMs: number;
  readonly maxCleanupHoldMs: number | null;
}

/** Checked once, where the health check is built: a bad option is an INVALID_ARGUMENT, not a surprise later. */
function resolveHealthOptions(options: HealthOptions | undefined): HealthSettings {
  const o = options ?? {};
  if (typeof o !== 'object') throw new InvalidArgumentError('health options must be an object');
  const whole = (what: string, value: unknown, fallback: number, min: number): number => {
    const n = value === undefined ? fallback : value;
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < min) {
      throw new InvalidArgumentError(`health.${what} must be a whole number of milliseconds ≥ ${min}`);
    }
    return n;
  };
  if (o.deadLettersDown !== undefined && typeof o.deadLettersDown !== 'boolean') {
    throw new InvalidArgumentError('health.deadLettersDown must be true or false');
  }
  return {
    deadLettersDown: o.deadLettersDown ?? true,
    maxPendingAgeMs:
      o.maxPendingAgeMs === null
        ? null
        : whole('maxPendingAgeMs', o.maxPendingAgeMs, DEFAULT_MAX_PENDING_AGE_MS, 0),
    timeoutMs: whole('timeoutMs', o.timeoutMs, DEFAULT_TIMEOUT_MS, 1),
    cacheMs: whole('cacheMs', o.cacheMs, DEFAULT_CACHE_MS, 0),
    maxCleanupHoldMs:
      o.maxCleanupHoldMs === null
        ? null
        : whole('maxCleanupHoldMs', o.maxCleanupHoldMs, DEFAULT_MAX_CLEANUP_HOLD_MS, 0),
  };
}

/**
 * One health answer, read on the database clock from the store's health probe (indexes only, so it
 * costs the same at millions of rows). The report carries the database's error text as `detail`:
 * pass it through `publicHealthReport` before answering anyone without the token.
 */
export async function checkHealth(store: CommandStore, options?: HealthOptions): Promise<HealthReport> {
  return (await readHealth(store, resolveHealthOptions(options))).report;
}

/** The report without what only the log and callers with the token may see. */
export function publicHealthReport(report: HealthReport): HealthReport {
  const { pausedTypes: _names, ...rest } = report;
  return {
    ...rest,
    reasons: report.reasons.map(({ code, message }) => ({ code, message })),
    warnings: report.warnings.map(({ code, message }) => ({ code, message })),
  };
}

/**
 * The admin handler's /health: one answer per `cacheMs` for every caller, concurrent callers
 * sharing one probe; the database's error text is logged once per answer computed.
 */
export function createHealthCheck(
  store: CommandStore,
  options?: HealthOptions,
  logger: Logger = silentLogger,
): () => Promise<HealthReport> {
  const settings = resolveHealthOptions(options);
  let answer: { readonly report: HealthReport; readonly at: number } | null = null;
  let computing: Promise<HealthReport> | null = null;
  return () => {
    if (answer !== null && performance.now() - answer.at < settings.cacheMs) {
      return Promise.resolve(answer.report);
    }
    computing ??= readHealth(store, settings)
      .then(({ report, failure }) => {
        answer = { report, at: performance.now() };
        if (failure !== undefined)
          logger.warn({ err: failure }, 'asynccmd health: the database could not be read');
        return report;
      })
      .finally(() => {
        computing = null;
      });
    return computing;
  };
}

async function readHealth(
  store: CommandStore,
  s: HealthSettings,
): Promise<{ report: HealthReport; failure?: unknown }> {
  const checkedAt = new Date().toISOString();
  let now: Date;
  let probe: HealthProbe;
  let pausedTypes: string[] | null;
  let cleanup: CleanupHorizon | null;
  try {
    // The database clock, like every lease: the ops process's own clock may be off.
    [now, probe, pausedTypes, cleanup] = await withTimeout(async () => {
      const at = await store.now();
      const [found, paused, horizon] = await Promise.all([
        store.healthProbe({ now: at, deadLetterLimit: HEALTH_DEAD_LETTER_LIMIT }),
        // Pauses are information, not health: unreadable (a table not yet migrated), they are
        // unknown, and the database is still judged by the probe alone.
        store.typePauses?.list().catch(() => null) ?? [],
        // Likewise the cleanup horizon (a missing privilege makes it unknown, nothing more).
        s.maxCleanupHoldMs === null ? null : (store.cleanupHorizon?.read().catch(() => null) ?? null),
      ]);
      return [at, found, paused === null ? null : paused.map((p) => p.type), horizon] as const;
    }, s.timeoutMs);
  } catch (failure) {
    return {
      failure,
      report: {
        status: 'DOWN',
        reasons: [
          {
            code: 'DATABASE_UNREACHABLE',
            message: 'the database could not be read',
            detail: describeFailure(failure),
          },
        ],
        checks: {
          database: 'DOWN',
          deadLetters: null,
          oldestPendingAgeMs: null,
          pausedTypes: null,
          cleanupHeldForMs: null,
          deadRows: null,
        },
        warnings: [],
        checkedAt,
      },
    };
  }
  const reasons: HealthReason[] = [];
  const { deadLetters, oldestDueAt } = probe;
  if (s.deadLettersDown && deadLetters > 0) {
    const counted = deadLetters >= HEALTH_DEAD_LETTER_LIMIT ? `${deadLetters} or more` : String(deadLetters);
    reasons.push({ code: 'DEAD_LETTERS', message: `${counted} dead letter(s) need a person` });
  }
  const age = oldestDueAt === null ? null : Math.max(0, now.getTime() - oldestDueAt.getTime());
  if (s.maxPendingAgeMs !== null && age !== null && age > s.maxPendingAgeMs) {
    reasons.push({
      code: 'BACKLOG_TOO_OLD',
      message: `the oldest due pending command has waited ${formatDuration(age)}, over the limit of ${formatDuration(s.maxPendingAgeMs)}`,
    });
  }
  const warnings: HealthWarning[] = [];
  const held = cleanup === null ? null : (cleanup.oldest?.heldForMs ?? 0);
  if (s.maxCleanupHoldMs !== null && cleanup?.oldest && (held ?? 0) > s.maxCleanupHoldMs) {
    const { oldest, deadRows } = cleanup;
    const rows = deadRows === null ? '' : ` (${deadRows} dead row versions waiting)`;
    warnings.push({
      code: 'CLEANUP_HELD',
      message:
        oldest.heldForMs === null
          ? `a ${oldest.kind.replace('-', ' ')} keeps the database from cleaning up finished commands${rows}`
          : `a ${oldest.kind.replace('-', ' ')} has kept the database from cleaning up finished commands for ${formatDuration(oldest.heldForMs)}${rows}`,
      detail: oldest.description,
    });
  }
  return {
    report: {
      status: reasons.length === 0 ? 'UP' : 'DOWN',
      reasons,
      checks: {
        database: 'UP',
        deadLetters,
        oldestPendingAgeMs: age,
        pausedTypes: pausedTypes?.length ?? null,
        cleanupHeldForMs: held,
        deadRows: cleanup?.deadRows ?? null,
      },
      warnings,
      ...(pausedTypes === null ? {} : { pausedTypes }),
      checkedAt,
    },
  };
}

function withTimeout<T>(work: () => Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([work(), timeout]).finally(() => clearTimeout(timer));
}
