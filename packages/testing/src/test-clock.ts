import Database from 'better-sqlite3';
import { InvalidArgumentError, type Clock } from '@asynccmd/core';
import type { SqliteDatabase } from '@asynccmd/adapter-sqlite';

/** Where a TestClock starts unless told: a fixed instant, so runs are reproducible. */
export const DEFAULT_TEST_START = new Date('2030-01-01T00:00:00.000Z');

/**
 * A clock that moves only when the test moves it. The kit gives it to the runtime (due times,
 * backoff) and to the store's database clock (leases, createdAt/startedAt/finishedAt).
 */
export class TestClock implements Clock {
  #ms: number;

  constructor(start: Date = DEFAULT_TEST_START) {
    this.#ms = validTime('start', start);
  }

  now(): Date {
    return new Date(this.#ms);
  }

  /** Moves the clock forward by `ms` (≥ 0) and returns the new time. */
  advance(ms: number): Date {
    if (!(Number.isFinite(ms) && ms >= 0)) {
      throw new InvalidArgumentError(
        `advance(ms) needs a finite number of milliseconds ≥ 0, not ${String(ms)}`,
      );
    }
    this.#ms += ms;
    return this.now();
  }

  /** Sets the clock to `at` (earlier or later). */
  set(at: Date): Date {
    this.#ms = validTime('at', at);
    return this.now();
  }
}

function validTime(name: string, value: unknown): number {
  const ms = value instanceof Date ? value.getTime() : NaN;
  if (!Number.isFinite(ms)) throw new InvalidArgumentError(`${name} must be a valid Date`);
  return ms;
}

/**
 * Makes the database clock of `db` the test clock: SQLite's one-argument `unixepoch()` answers
 * from `clock` for 'now' and 'subsec' (what the SQLite store reads the database clock with), so a
 * lease runs out when the test advances past it. Other arguments (a date text) are computed by
 * SQLite as usual on a private connection. Returns the function that closes that connection.
 */
export function followClockInDatabase(db: SqliteDatabase, clock: Clock): () => void {
  let plain: SqliteDatabase | null = null;
  db.function('unixepoch', { deterministic: false }, (value: unknown) => {
    const ms = clock.now().getTime();
    if (typeof value === 'string') {
      const text = value.trim().toLowerCase();
      if (text === 'subsec' || text === 'subsecond') return ms / 1000;
      if (text === 'now') return Math.floor(ms / 1000);
    }
    plain ??= new Database(':memory:');
    return plain.prepare('SELECT unixepoch(?)').pluck().get(value) as number | null;
  });
  return () => plain?.close();
}
