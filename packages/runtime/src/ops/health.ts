import { describeFailure, type CommandStore } from '@asynccmd/core';
import { formatDuration } from './duration.js';
import { readStats } from './stats-view.js';

export interface HealthOptions {
  /**
   * DOWN while any dead letter exists (seed §5: a command that exhausted its retries must be seen,
   * and swallowing it silently is worse than alerting). Default true.
   */
  readonly deadLettersDown?: boolean;
  /** DOWN when the oldest due PENDING command has waited longer than this; null disables. Default 15 min. */
  readonly maxPendingAgeMs?: number | null;
  /** A database that does not answer within this is unreachable. Default 5 s. */
  readonly timeoutMs?: number;
}

export const DEFAULT_MAX_PENDING_AGE_MS = 15 * 60_000;
const DEFAULT_TIMEOUT_MS = 5_000;

export interface HealthReport {
  readonly status: 'UP' | 'DOWN';
  /** Why it is DOWN, in words; empty when UP. */
  readonly reasons: readonly string[];
  readonly checks: {
    readonly database: 'UP' | 'DOWN';
    /** null when the database could not be read. */
    readonly deadLetters: number | null;
    readonly oldestPendingAgeMs: number | null;
  };
}

export async function checkHealth(store: CommandStore, options: HealthOptions = {}): Promise<HealthReport> {
  const deadLettersDown = options.deadLettersDown ?? true;
  const maxPendingAgeMs =
    options.maxPendingAgeMs === undefined ? DEFAULT_MAX_PENDING_AGE_MS : options.maxPendingAgeMs;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  let stats;
  try {
    await withTimeout(store.ping(), timeoutMs);
    stats = await withTimeout(readStats(store), timeoutMs);
  } catch (error) {
    return {
      status: 'DOWN',
      reasons: [`database unreachable: ${describeFailure(error)}`],
      checks: { database: 'DOWN', deadLetters: null, oldestPendingAgeMs: null },
    };
  }
  const reasons: string[] = [];
  const deadLetters = stats.byStatus.DEAD;
  if (deadLettersDown && deadLetters > 0) {
    const types = Object.entries(stats.byType)
      .filter(([, counts]) => counts.DEAD > 0)
      .map(([type, counts]) => `${type}: ${counts.DEAD}`);
    reasons.push(`${deadLetters} dead letter(s) need a person (${types.join(', ')})`);
  }
  const age = stats.oldestPendingAgeMs;
  if (maxPendingAgeMs !== null && age !== null && age > maxPendingAgeMs) {
    reasons.push(
      `oldest due pending command has waited ${formatDuration(age)}, over the limit of ${formatDuration(maxPendingAgeMs)}`,
    );
  }
  return {
    status: reasons.length === 0 ? 'UP' : 'DOWN',
    reasons,
    checks: { database: 'UP', deadLetters, oldestPendingAgeMs: age },
  };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
