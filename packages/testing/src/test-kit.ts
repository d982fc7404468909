import { randomUUID } from 'node:crypto';
import { AssertionError } from 'node:assert';
import Database from 'better-sqlite3';
import {
  DEFAULT_MAX_RESCUES,
  InvalidArgumentError,
  redactErrorText,
  silentLogger,
  type ClaimedCommand,
  type CommandEventListener,
  type CommandRecord,
  type ReclaimedCommand,
  LIMITS,
} from '@asynccmd/core';
import {
  configureConnection,
  createSqliteStore,
  type SqliteCommandStore,
  type SqliteDatabase,
} from '@asynccmd/adapter-sqlite';
import {
  AsyncCommands,
  type AnyExecutor,
  type AsyncCommandClient,
  type AsyncCommandsOptions,
  type CommandTypeMap,
  type PayloadMapOf,
  type PoolOptions,
  type SubmitOptions,
  type TxSubmit,
} from '@asynccmd/runtime';
import type { ExecutorTransactions } from '@asynccmd/runtime/test-kit';
import { AttemptRunner, type AttemptReport } from './attempts.js';
import { DrainLimitError, TestKitError } from './errors.js';
import { describeMatcher, listCommands, matchesPayload, type PayloadMatcher } from './matchers.js';
import { followClockInDatabase, TestClock } from './test-clock.js';

/** Rounds a drain runs before it gives up with DrainLimitError. */
export const DEFAULT_MAX_ROUNDS = 100;
/** Real time an attempt may take before the kit stops waiting for it. */
export const DEFAULT_HANG_TIMEOUT_MS = 2_000;

/** Rows per claim or reclaim statement; a round repeats them until nothing more comes back. */
const BATCH = 500;

/** Runtime options the kit passes on unchanged. */
const RUNTIME_OPTIONS = [
  'submitOnlyTypes',
  'logger',
  'interceptors',
  'headersProvider',
  'owner',
  'maxPayloadBytes',
  'maxResultBytes',
  'defaultMaxRetry',
  'backoff',
  'redactError',
  'leaseMs',
  'maxRescues',
] as const satisfies readonly (keyof AsyncCommandsOptions)[];

type RuntimeOptions = Pick<AsyncCommandsOptions<SqliteDatabase>, (typeof RUNTIME_OPTIONS)[number]>;

export interface TestKitOptions extends RuntimeOptions {
  /** The executors under test (the same objects the application registers). */
  readonly executors: readonly AnyExecutor[];
  /** Where the test clock starts. Default DEFAULT_TEST_START (2030-01-01T00:00:00Z). */
  readonly startAt?: Date;
  /**
   * A better-sqlite3 handle of yours (e.g. with your business tables), shared by the store and
   * never closed by the kit. Default: a fresh in-memory database owned by the kit. Either way its
   * one-argument `unixepoch('now' | 'subsec')` answers from the test clock.
   */
  readonly database?: SqliteDatabase;
  /** The command table. Default `async_command`. */
  readonly table?: string;
  /** Default for drainUntilIdle's `maxRounds`. */
  readonly maxRounds?: number;
  /** Default for drainUntilIdle's `hangTimeoutMs`. */
  readonly hangTimeoutMs?: number;
}

export interface DrainOptions {
  /** Rounds before DrainLimitError. Default: the kit's (DEFAULT_MAX_ROUNDS). */
  readonly maxRounds?: number;
  /** Real milliseconds an attempt may take before the kit stops waiting. Default: the kit's (2 s). */
  readonly hangTimeoutMs?: number;
}

export interface DrainResult {
  /** Rounds that ran something. */
  readonly rounds: number;
  /** Every attempt, in the order they ran. */
  readonly attempts: readonly AttemptReport[];
  /** Commands taken back because their lease had run out on the test clock. */
  readonly reclaimed: readonly ReclaimedCommand[];
}

export interface ExpectSubmittedOptions {
  /** Exactly this many submitted commands must match. Default: at least one. */
  readonly count?: number;
}

type TypeOf<TM> = keyof TM & string;

/** The executors' payload types, plus `unknown` payloads for the submit-only types. */
export type TestKitTypes<E extends readonly AnyExecutor[], S extends readonly string[]> = PayloadMapOf<
  E[number]
> & { readonly [K in S[number]]: unknown };

/**
 * Creates a test kit: an in-memory SQLite store (migrated), a TestClock, and the application's
 * executors registered with the runtime's client. Nothing runs by itself: `drainUntilIdle()` runs
 * what is due, `advance(ms)` moves time.
 */
export async function createTestKit<
  const E extends readonly AnyExecutor[],
  const S extends readonly string[] = [],
>(
  options: TestKitOptions & { readonly executors: E; readonly submitOnlyTypes?: S },
): Promise<TestKit<TestKitTypes<E, S>>> {
  const clock = new TestClock(options.startAt);
  const db = options.database ?? new Database(':memory:');
  const owned = options.database === undefined;
  let closeClock = (): void => undefined;
  try {
    if (owned) configureConnection(db);
    closeClock = followClockInDatabase(db, clock);
    const store = createSqliteStore({
      database: db,
      ...(options.table === undefined ? {} : { table: options.table }),
      ...(options.maxPayloadBytes === undefined ? {} : { maxPayloadBytes: options.maxPayloadBytes }),
    });
    await store.migrate();
    const dbNow = await store.now();
    if (dbNow.getTime() !== clock.now().getTime()) {
      throw new TestKitError(
        'DATABASE_CLOCK',
        `the store's database clock (${dbNow.toISOString()}) does not follow the test clock ` +
          `(${clock.now().toISOString()}): this adapter-sqlite reads its clock some other way`,
      );
    }
    return new TestKit<TestKitTypes<E, S>>(options, { clock, db, owned, store, closeClock });
  } catch (error) {
    // Bad options (an unknown pool, a hostile table name, …): nothing may stay open.
    closeClock();
    if (owned) db.close();
    throw error;
  }
}

interface KitParts {
  readonly clock: TestClock;
  readonly db: SqliteDatabase;
  readonly owned: boolean;
  readonly store: SqliteCommandStore;
  readonly closeClock: () => void;
}

/** See createTestKit. */
export class TestKit<TM extends CommandTypeMap = CommandTypeMap> {
  /** The runtime's client, as the application uses it (validation included). */
  readonly client: AsyncCommandClient<TM, SqliteDatabase>;
  readonly store: SqliteCommandStore;
  /** The SQLite handle: create your business tables here, read them in assertions. */
  readonly db: SqliteDatabase;
  readonly clock: TestClock;
  readonly #runtime: AsyncCommands<TM, SqliteDatabase>;
  readonly #attempts: AttemptRunner;
  readonly #maxRescues: number;
  readonly #defaults: Required<DrainOptions>;
  readonly #parts: KitParts;
  #busy = false;

  /** Use createTestKit (it migrates the store first). */
  constructor(options: TestKitOptions, parts: KitParts) {
    this.#parts = parts;
    this.store = parts.store;
    this.db = parts.db;
    this.clock = parts.clock;
    const logger = options.logger ?? silentLogger;
    // Never started: the kit runs commands itself, so nothing runs behind the test's back.
    const passedOn = RUNTIME_OPTIONS.filter((key) => options[key] !== undefined).map((key) => [
      key,
      options[key],
    ]);
    this.#runtime = new AsyncCommands<TM, SqliteDatabase>({
      ...(Object.fromEntries(passedOn) as RuntimeOptions),
      executors: options.executors,
      store: parts.store,
      clock: parts.clock,
      logger,
      pools: poolsNamedBy(options.executors),
    });
    this.client = this.#runtime.client;
    this.#maxRescues = options.maxRescues ?? DEFAULT_MAX_RESCUES;
    this.#defaults = {
      maxRounds: positiveInt('maxRounds', options.maxRounds ?? DEFAULT_MAX_ROUNDS),
      hangTimeoutMs: positiveInt('hangTimeoutMs', options.hangTimeoutMs ?? DEFAULT_HANG_TIMEOUT_MS),
    };
    this.#attempts = new AttemptRunner({
      store: parts.store,
      registry: this.#runtime.registry,
      events: this.#runtime.events,
      clock: parts.clock,
      logger,
      interceptors: options.interceptors ?? [],
      maxResultBytes: options.maxResultBytes ?? LIMITS.defaultResultBytes,
      redactError: options.redactError ?? redactErrorText,
      // The runtime hands its runner the same client, typed for any command type map.
      client: this.client as unknown as ExecutorTransactions,
    });
  }

  /**
   * `client.transaction`: runs `fn` in a store transaction with a `submit` bound to it; commits, or
   * rolls back (nothing submitted) if `fn` throws. The commands wait for drainUntilIdle().
   */
  transaction<T>(fn: (tx: SqliteDatabase, submit: TxSubmit<TM>) => Promise<T>): Promise<T> {
    return this.client.transaction(fn);
  }

  /** Every CommandEvent of the commands the kit runs (and submits); returns the unsubscribe function. */
  on(listener: CommandEventListener): () => void {
    return this.#runtime.on(listener);
  }

  /** Moves the test clock forward: retries and delayed commands become due. Returns the new time. */
  advance(ms: number): Date {
    return this.clock.advance(ms);
  }

  /**
   * Runs every due command inline, whatever its mode, oldest due first, one at a time, in rounds:
   * a round first takes back commands whose lease ran out on the test clock, then claims all that
   * is due and runs it; what those executors submit runs in the next round. Ends when a round
   * finds nothing due; retries wait for `advance()`.
   *
   * An attempt that has not settled after `hangTimeoutMs` (real time): with a `timeoutMs` on its
   * executor it fails as the runtime's timeout would fail it (and is retried); without one, the
   * kit treats the instance running it as dead — its signal is aborted, none of its writes land,
   * and the command stays RUNNING until its lease runs out on the test clock
   * (`advance(leaseMs)`), when the next drain takes it back and runs it again.
   *
   * Throws DrainLimitError after `maxRounds` rounds with work still due.
   */
  async drainUntilIdle(options: DrainOptions = {}): Promise<DrainResult> {
    const maxRounds = positiveInt('maxRounds', options.maxRounds ?? this.#defaults.maxRounds);
    const hangTimeoutMs = positiveInt('hangTimeoutMs', options.hangTimeoutMs ?? this.#defaults.hangTimeoutMs);
    return this.#exclusive('drainUntilIdle()', async () => {
      const attempts: AttemptReport[] = [];
      const reclaimed: ReclaimedCommand[] = [];
      for (let round = 1; ; round++) {
        reclaimed.push(...(await this.#reclaim()));
        const due = await this.#claimDue();
        if (due.length === 0) return { rounds: round - 1, attempts, reclaimed };
        if (round > maxRounds) {
          await this.store.release(due.map((row) => ({ id: row.id, token: row.claimToken })));
          throw new DrainLimitError(
            maxRounds,
            attempts,
            due.map((row) => row.type),
          );
        }
        for (const row of due) attempts.push(await this.#attempts.run(row, round, hangTimeoutMs));
      }
    });
  }

  /**
   * Submits one command in its own transaction and runs that attempt at once, whatever its mode
   * (River's Worker test helper). What its executor submits is left PENDING for
   * expectSubmitted / drainUntilIdle.
   */
  async runOnce<K extends TypeOf<TM>>(
    type: K,
    payload: TM[K],
    options: Omit<SubmitOptions, 'runAt'> & Pick<DrainOptions, 'hangTimeoutMs'> = {},
  ): Promise<AttemptReport> {
    const { hangTimeoutMs: hangOption, ...submitOptions } = options;
    const entry = this.#runtime.registry.require(type);
    const hangTimeoutMs = positiveInt('hangTimeoutMs', hangOption ?? this.#defaults.hangTimeoutMs);
    return this.#exclusive('runOnce()', async () => {
      const id = await this.client.transaction((_tx, submit) => submit(type, payload, submitOptions));
      const row = await this.store.claimById({
        id,
        now: this.clock.now(),
        token: randomUUID(),
        leaseMs: entry.leaseMs,
        types: [type],
      });
      if (row === null)
        throw new Error(`command ${id} (${type}) could not be claimed right after its submit`);
      return this.#attempts.run(row, 1, hangTimeoutMs);
    });
  }

  /** The submitted commands (of `type`, when given), oldest first, in their current state. */
  async submitted<K extends TypeOf<TM>>(type?: K): Promise<CommandRecord<TM[K]>[]> {
    const commands: CommandRecord[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.store.list({
        limit: 1000,
        ...(type === undefined ? {} : { type }),
        ...(cursor === undefined ? {} : { cursor }),
      });
      commands.push(...page.items);
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
    return commands.reverse() as CommandRecord<TM[K]>[];
  }

  /**
   * Asserts that a command of `type` was submitted (committed), with a payload matching `matcher`
   * when given — at least one, or exactly `count`. Returns the oldest match. Throws node:assert's
   * AssertionError, listing what was submitted, when it was not.
   */
  async expectSubmitted<K extends TypeOf<TM>>(
    type: K,
    matcher?: PayloadMatcher<TM[K]>,
    options: ExpectSubmittedOptions = {},
  ): Promise<CommandRecord<TM[K]>> {
    const { count } = options;
    if (count !== undefined && !(Number.isInteger(count) && count >= 1)) {
      throw new InvalidArgumentError(
        'expectSubmitted: count must be an integer ≥ 1 (use expectNotSubmitted for 0)',
      );
    }
    const all = await this.submitted();
    const matches = (all as CommandRecord<TM[K]>[]).filter(
      (c) => c.type === type && matchesPayload(matcher, c),
    );
    const first = matches[0];
    if (first !== undefined && (count === undefined || matches.length === count)) return first;
    const wanted =
      count === undefined
        ? `a submitted "${type}" command`
        : `exactly ${count} submitted "${type}" command${count === 1 ? '' : 's'}`;
    const found =
      matches.length === 0 ? 'none was' : `${matches.length} ${matches.length === 1 ? 'was' : 'were'}`;
    throw submittedAssertion(
      `expected ${wanted} with ${describeMatcher(matcher)}, but ${found}.`,
      all,
      {
        actual: all.filter((c) => c.type === type).map((c) => c.payload),
        expected: [typeof matcher === 'function' ? '[predicate]' : matcher],
      },
      'expectSubmitted',
    );
  }

  /** Asserts that no command of `type` (with a payload matching `matcher`, when given) was submitted. */
  async expectNotSubmitted<K extends TypeOf<TM>>(type: K, matcher?: PayloadMatcher<TM[K]>): Promise<void> {
    const all = await this.submitted();
    const matches = (all as CommandRecord<TM[K]>[]).filter(
      (c) => c.type === type && matchesPayload(matcher, c),
    );
    if (matches.length === 0) return;
    throw submittedAssertion(
      `expected no submitted "${type}" command with ${describeMatcher(matcher)}, but ${matches.length} ${
        matches.length === 1 ? 'was' : 'were'
      }.`,
      all,
      { actual: matches.map((c) => c.payload), expected: [] },
      'expectNotSubmitted',
    );
  }

  /** Closes the store, and the database when the kit opened it. */
  async close(): Promise<void> {
    await this.store.close();
    this.#parts.closeClock();
    if (this.#parts.owned && this.db.open) this.db.close();
  }

  async #exclusive<T>(what: string, work: () => Promise<T>): Promise<T> {
    if (this.#busy) {
      throw new TestKitError(
        'DRAIN_IN_PROGRESS',
        `${what} was called while the kit was already running commands (from an executor, or without await)`,
      );
    }
    this.#busy = true;
    try {
      return await work();
    } finally {
      this.#busy = false;
    }
  }

  async #reclaim(): Promise<ReclaimedCommand[]> {
    const reclaimed: ReclaimedCommand[] = [];
    for (;;) {
      const batch = await this.store.reclaimHung({ limit: BATCH, maxRescues: this.#maxRescues });
      for (const r of batch) {
        this.#runtime.events.emit({ kind: 'reclaimed', id: r.id, type: r.type, dead: r.status === 'DEAD' });
      }
      reclaimed.push(...batch);
      if (batch.length < BATCH) return reclaimed;
    }
  }

  /**
   * Claims everything due now, each type with its own lease, but the paused types (as a runtime
   * leaves them out); in claim order (priority, due, id).
   */
  async #claimDue(): Promise<ClaimedCommand[]> {
    const paused = new Set((await this.store.typePauses?.list())?.map((p) => p.type));
    const byLease = new Map<number, string[]>();
    for (const entry of this.#runtime.registry.entries()) {
      if (paused.has(entry.type)) continue;
      byLease.set(entry.leaseMs, [...(byLease.get(entry.leaseMs) ?? []), entry.type]);
    }
    const now = this.clock.now();
    const claimed: ClaimedCommand[] = [];
    for (const [leaseMs, types] of byLease) {
      for (;;) {
        const rows = await this.store.claimDue({ types, limit: BATCH, now, token: randomUUID(), leaseMs });
        claimed.push(...rows);
        if (rows.length < BATCH) break;
      }
    }
    return claimed.sort(
      (a, b) =>
        a.priority - b.priority || a.nextRunAt.getTime() - b.nextRunAt.getTime() || compareIds(a.id, b.id),
    );
  }
}

/** Every pool the executors name, declared so the runtime accepts them (the kit never uses pools). */
function poolsNamedBy(executors: readonly AnyExecutor[]): Record<string, PoolOptions> {
  const pools: Record<string, PoolOptions> = {};
  for (const executor of executors) if (executor?.pool) pools[executor.pool] = { concurrency: 1 };
  return pools;
}

function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

function positiveInt(name: string, value: number): number {
  if (!(Number.isInteger(value) && value >= 1)) {
    throw new InvalidArgumentError(`${name} must be an integer ≥ 1, not ${String(value)}`);
  }
  return value;
}

/**
 * node:assert's AssertionError, with `actual` and `expected` for the diff a test runner prints:
 * the payloads of the type against the matcher (expectSubmitted), or the matching payloads
 * against none (expectNotSubmitted).
 */
function submittedAssertion(
  summary: string,
  all: readonly CommandRecord[],
  diff: { readonly actual: readonly unknown[]; readonly expected: readonly unknown[] },
  operator: string,
): AssertionError {
  return new AssertionError({
    message: `${summary}\n${listCommands(all)}`,
    actual: diff.actual,
    expected: diff.expected,
    operator,
  });
}
