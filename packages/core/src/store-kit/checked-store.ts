import type * as E from 'fp-ts/lib/Either.js';
import type { ClaimedCommand, ClaimRef, CommandId, CommandRecord, ProgressReport } from '../command.js';
import { InvalidArgumentError } from '../errors.js';
import { requireDate, requireStoredTime } from '../input-checks.js';
import type { CleanupHorizonProbe } from '../ports/cleanup-horizon.js';
import type { MigrationScript } from '../ports/migrations.js';
import {
  requireScheduleDefinition,
  requireScheduleName,
  type EnqueueTickResult,
  type RunTimeScheduleSettings,
  type ScheduleDefinition,
  type ScheduleRecord,
  type ScheduleStore,
} from '../ports/schedules.js';
import type { SqlExecutor } from '../ports/sql-executor.js';
import type {
  AdminError,
  AttemptSavepoints,
  CommandStore,
  HealthProbe,
  HealthProbeParams,
  InsertResult,
  ListPage,
  OnPending,
  OutcomeCount,
  OutcomeCountParams,
  ReclaimedCommand,
  RevocationChannel,
  StoreCapabilities,
  StoreStats,
  TransactionalCompletion,
  WakeupChannel,
} from '../ports/store.js';
import {
  requireTransaction,
  StoreInput,
  type CheckedClaimById,
  type CheckedClaimDue,
  type CheckedCommand,
  type CheckedCompletedAttempt,
  type CheckedFailedAttempt,
  type CheckedListQuery,
  type CheckedPurge,
  type CheckedReclaim,
} from './input.js';
import type { RateLimitStatements } from './rate-limits.js';
import { rateLimitStore } from './rate-limits.js';
import { keyLimitStore, type KeyLimitStatements } from './key-limits.js';
import { keyRateLimitStore, type KeyRateLimitStatements } from './key-rate-limits.js';
import { typeLimitStore, type TypeLimitStatements } from './type-limits.js';
import { typePauseStore, type TypePauseStatements } from './type-pauses.js';
import { checkedDependencies, type DependencyEngine } from './dependencies.js';
import { submitWindowStore, type SubmitWindowStatements } from './submit-windows.js';

/*
 * The checked store: the one CommandStore every adapter hands out. It checks each call's input
 * once, with core's one set of limits (LIMITS), and passes what passed to the adapter's engine,
 * which only encodes it for its database, runs its SQL and maps its rows. Bad input is refused here
 * with a typed error before any statement runs; calls that can do nothing (no ids, a limit of 0)
 * are answered here too, so an engine never sees them.
 *
 * To add a store operation: give StoreEngine a method taking the checked input (a Checked* type
 * from input.ts, or plain values this file has checked), and give checkedStore's object the port's
 * method, which checks its arguments (a StoreInput method) and then delegates. An engine never
 * calls a check; the port method never runs SQL.
 */

/** A schedule tick whose command is checked. */
export interface CheckedScheduleTick {
  readonly schedule: string;
  /** Within the stored range. */
  readonly tick: Date;
  readonly command: CheckedCommand;
}

/** The schedules table of an adapter (see ScheduleStore), given checked input. */
export interface ScheduleEngine {
  /** Definitions checked; `now` within the stored range. */
  declare(definitions: readonly ScheduleDefinition[], now: Date): Promise<void>;
  list(): Promise<ScheduleRecord[]>;
  get(name: string): Promise<ScheduleRecord | null>;
  setPaused(name: string, paused: boolean, now: Date): Promise<ScheduleRecord | null>;
  enqueueTick(tick: CheckedScheduleTick): Promise<EnqueueTickResult>;
  remove(name: string): Promise<boolean>;
  add(
    definition: ScheduleDefinition,
    settings: RunTimeScheduleSettings,
    now: Date,
  ): Promise<ScheduleRecord | null>;
}

/** TransactionalCompletion of an adapter, given a checked attempt or claim. */
export interface TransactionalCompletionEngine<Tx> {
  complete(tx: Tx | SqlExecutor, attempt: CheckedCompletedAttempt): Promise<boolean>;
  completeAtCommit?(tx: Tx | SqlExecutor, attempt: CheckedCompletedAttempt): boolean;
  claimLost?(error: unknown): boolean;
  readonly throughSqlExecutor?: boolean;
  succeededUnder(ref: ClaimRef): Promise<boolean>;
  isTransient(error: unknown): boolean;
  readonly savepoints?: SavepointsEngine<Tx>;
}

/** AttemptSavepoints of an adapter: names already checked, attempts checked. */
export interface SavepointsEngine<Tx> {
  open(tx: Tx, name: string): Promise<void>;
  rollbackTo(tx: Tx, name: string): Promise<void>;
  /** At least one attempt. */
  completeAll(tx: Tx, attempts: readonly CheckedCompletedAttempt[]): Promise<CommandId[]>;
  failed?(tx: Tx): Promise<boolean>;
}

/**
 * completeAll for a store whose completions go one by one: `complete` of each attempt in turn (a
 * transaction runs one statement at a time anyway).
 */
export async function completeEach<Tx>(
  complete: (tx: Tx, attempt: CheckedCompletedAttempt) => Promise<boolean>,
  tx: Tx,
  attempts: readonly CheckedCompletedAttempt[],
): Promise<CommandId[]> {
  const done: CommandId[] = [];
  for (const attempt of attempts) if (await complete(tx, attempt)) done.push(attempt.id);
  return done;
}

/** CommitRiding of an adapter: its claimById takes checked parameters. */
export interface CommitRidingEngine<Tx> {
  claimById(tx: Tx, claim: CheckedClaimById): Promise<ClaimedCommand | null> | null;
  notify(tx: Tx): boolean;
}

export interface EngineCapabilities<Tx> extends Omit<StoreCapabilities<Tx>, 'commitRiding'> {
  readonly commitRiding: CommitRidingEngine<Tx> | null;
}

/**
 * What an adapter implements: the store port's operations with checked input (see the Checked*
 * types), each called only with input that can change something (at least one ref, a limit ≥ 1).
 */
export interface StoreEngine<Tx> {
  readonly dialect: string;
  /** Read on every access of the store's `capabilities` (an engine may learn them late). */
  readonly capabilities: EngineCapabilities<Tx>;
  /**
   * The adapter's own transaction handle, for the check of a submit's `tx`: `name` says what it is
   * in the error ("a pg client"), `is` recognises one.
   */
  readonly transactionHandle: { readonly name: string; is(candidate: object): boolean };

  migrate(): Promise<void>;
  migrationScript?(options: { readonly all: boolean }): Promise<MigrationScript>;
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;

  /** At least one command. */
  insert(tx: Tx | SqlExecutor, commands: readonly CheckedCommand[]): Promise<CommandId[]>;
  insertIdempotent(
    tx: Tx | SqlExecutor,
    command: CheckedCommand & { readonly bizKey: string },
    onPending: OnPending,
  ): Promise<InsertResult>;
  claimDue(claim: CheckedClaimDue): Promise<ClaimedCommand[]>;
  claimById(claim: CheckedClaimById): Promise<ClaimedCommand | null>;
  /** Returns the refs (of those given) whose claim still holds. */
  heartbeat(refs: readonly ClaimRef[], leaseMs: number): Promise<ClaimRef[]>;
  /** At least one report, one per claim at most; returns the ids written. */
  reportProgress(reports: readonly ProgressReport[]): Promise<CommandId[]>;
  complete(attempts: readonly CheckedCompletedAttempt[]): Promise<CommandId[]>;
  fail(attempts: readonly CheckedFailedAttempt[]): Promise<CommandId[]>;
  release(refs: readonly ClaimRef[]): Promise<CommandId[]>;
  releaseRevoked(refs: readonly ClaimRef[]): Promise<CommandId[]>;
  reclaimHung(reclaim: CheckedReclaim): Promise<ReclaimedCommand[]>;
  /** `now` within the stored range. */
  retry(id: CommandId, now: Date): Promise<E.Either<AdminError, CommandRecord>>;
  requeue(id: CommandId, now: Date): Promise<E.Either<AdminError, CommandRecord>>;
  /** `reason` as lastError holds it (see errorText), or null. */
  kill(id: CommandId, reason: string | null): Promise<E.Either<AdminError, CommandRecord>>;
  cancel(id: CommandId, reason: string | null): Promise<E.Either<AdminError, CommandRecord>>;
  get(id: CommandId): Promise<CommandRecord | null>;
  /** At least one id. */
  getMany(ids: readonly CommandId[]): Promise<CommandRecord[]>;
  list(query: CheckedListQuery): Promise<ListPage>;
  /** `now` clamped into the stored range. */
  stats(now: Date): Promise<StoreStats>;
  /** `now` clamped into the stored range. */
  healthProbe(params: HealthProbeParams): Promise<HealthProbe>;
  outcomeCounts(params: OutcomeCountParams): Promise<OutcomeCount[]>;
  purge(purge: CheckedPurge): Promise<number>;
  now(): Promise<Date>;
  ping(): Promise<void>;
  close(): Promise<void>;

  readonly wakeups?: WakeupChannel;
  readonly revocations?: RevocationChannel;
  readonly cleanupHorizon?: CleanupHorizonProbe;
  readonly schedules: ScheduleEngine;
  readonly typeLimits: TypeLimitStatements;
  readonly typePauses: TypePauseStatements;
  readonly rateLimits: RateLimitStatements;
  readonly keyLimits: KeyLimitStatements;
  readonly keyRateLimits: KeyRateLimitStatements;
  readonly transactionalCompletion: TransactionalCompletionEngine<Tx>;
  /** Waiting commands and workflows (see DependencyEngine; checkedDependencies checks their input). */
  readonly dependencies: DependencyEngine<Tx>;
  readonly submitWindows: SubmitWindowStatements<Tx>;
}

export interface CheckedStoreOptions {
  /** Largest payload accepted, in UTF-8 bytes of its JSON; default DEFAULT_MAX_PAYLOAD_BYTES. */
  readonly maxPayloadBytes?: number;
}

/** The parts of the port every store has, each over its engine part. */
type RequiredPart =
  | 'schedules'
  | 'typeLimits'
  | 'typePauses'
  | 'rateLimits'
  | 'keyLimits'
  | 'keyRateLimits'
  | 'transactionalCompletion'
  | 'dependencies'
  | 'submitWindows';

/** The capabilities of the port that an engine may have (the conformance suite checks them when present). */
type EnginePart = 'migrationScript' | 'wakeups' | 'revocations' | 'cleanupHorizon';

/** The CommandStore over an engine of type `Engine`: each optional part the engine always has, it has. */
export type CheckedStore<Tx, Engine> = CommandStore<Tx> & {
  readonly [
    K in EnginePart as K extends keyof Engine ? (undefined extends Engine[K] ? never : K) : never
  ]-?: NonNullable<CommandStore<Tx>[K]>;
};

/**
 * The CommandStore over `engine`: every call's input checked (once), then delegated. `extra`'s
 * properties (getters included) are added to it: what the adapter's own store type offers beyond
 * the port (its pool, its table name).
 */
export function checkedStore<Tx, Engine extends StoreEngine<Tx>, Extra extends object = object>(
  engine: Engine,
  options: CheckedStoreOptions = {},
  extra?: Extra,
): CheckedStore<Tx, Engine> & Extra {
  const input = new StoreInput({ maxPayloadBytes: options.maxPayloadBytes });
  const submitTransaction = (tx: unknown): Tx | SqlExecutor =>
    requireTransaction<Tx>(tx, engine.transactionHandle.name, (c) => engine.transactionHandle.is(c));
  const script = engine.migrationScript?.bind(engine);
  let capabilitiesOf: EngineCapabilities<Tx> | null = null;
  let capabilities: StoreCapabilities<Tx> | null = null;

  const core: Omit<CommandStore<Tx>, RequiredPart> = {
    dialect: engine.dialect,
    get capabilities(): StoreCapabilities<Tx> {
      const current = engine.capabilities;
      if (capabilities === null || capabilitiesOf !== current) {
        capabilitiesOf = current;
        capabilities = { ...current, commitRiding: checkedCommitRiding(current.commitRiding, input) };
      }
      return capabilities;
    },
    migrate: () => engine.migrate(),
    ...(script && { migrationScript: (options) => script({ all: options?.all === true }) }),
    transaction: (fn) => engine.transaction(fn),

    async insert(tx, commands) {
      const handle = submitTransaction(tx);
      const checked = input.commands(commands);
      return checked.length === 0 ? [] : engine.insert(handle, checked);
    },
    async insertIdempotent(tx, command, options) {
      const handle = submitTransaction(tx);
      const checked = input.idempotentCommand(command);
      return engine.insertIdempotent(handle, checked, input.onPending(options));
    },
    async claimDue(params) {
      const claim = input.claimDue(params);
      return claim === null ? [] : engine.claimDue(claim);
    },
    async claimById(params) {
      const claim = input.claimById(params);
      return claim === null ? null : engine.claimById(claim);
    },
    async heartbeat(refs, leaseMs) {
      const lease = input.leaseMs(leaseMs);
      const checked = input.refs(refs);
      return checked.length === 0 ? [] : engine.heartbeat(checked, lease);
    },
    async reportProgress(reports) {
      const checked = input.progressReports(reports);
      return checked.length === 0 ? [] : engine.reportProgress(checked);
    },
    async complete(attempts) {
      const checked = input.completedAttempts(attempts);
      return checked.length === 0 ? [] : engine.complete(checked);
    },
    async fail(attempts) {
      const checked = input.failedAttempts(attempts);
      return checked.length === 0 ? [] : engine.fail(checked);
    },
    async release(refs) {
      const checked = input.refs(refs);
      return checked.length === 0 ? [] : engine.release(checked);
    },
    async releaseRevoked(refs) {
      const checked = input.refs(refs);
      return checked.length === 0 ? [] : engine.releaseRevoked(checked);
    },
    async reclaimHung(params) {
      const reclaim = input.reclaim(params);
      return reclaim === null ? [] : engine.reclaimHung(reclaim);
    },
    async retry(id, now) {
      const at = input.adminNow(now);
      return engine.retry(input.id(id), at);
    },
    async requeue(id, now) {
      const at = input.adminNow(now);
      return engine.requeue(input.id(id), at);
    },
    async kill(id, reason) {
      const why = input.reason(reason);
      return engine.kill(input.id(id), why);
    },
    async cancel(id, reason) {
      const why = input.reason(reason);
      return engine.cancel(input.id(id), why);
    },
    async get(id) {
      return engine.get(input.id(id));
    },
    async getMany(ids) {
      const checked = input.ids(ids);
      return checked.length === 0 ? [] : engine.getMany(checked);
    },
    async list(query) {
      return engine.list(input.list(query));
    },
    async stats(now) {
      return engine.stats(input.instant('now', now));
    },
    async healthProbe(params) {
      const { now, deadLetterLimit } = input.healthProbe(params);
      return engine.healthProbe({ now: input.instant('now', now), deadLetterLimit });
    },
    async outcomeCounts(params) {
      return engine.outcomeCounts(input.outcomeCounts(params));
    },
    async purge(params) {
      const purge = input.purge(params);
      return purge === null ? 0 : engine.purge(purge);
    },
    now: () => engine.now(),
    ping: () => engine.ping(),
    close: () => engine.close(),
  };

  const store: CommandStore<Tx> = Object.assign(core, {
    schedules: checkedSchedules(engine.schedules, input),
    typeLimits: typeLimitStore(engine.typeLimits.write, engine.typeLimits.read),
    typePauses: typePauseStore(engine.typePauses),
    rateLimits: rateLimitStore(engine.rateLimits),
    keyLimits: keyLimitStore(engine.keyLimits),
    keyRateLimits: keyRateLimitStore(engine.keyRateLimits.write, engine.keyRateLimits.read),
    transactionalCompletion: checkedCompletion(engine.transactionalCompletion, input),
    // A waiting submit's commands go through the store's own insert (checked there).
    dependencies: checkedDependencies(engine.dependencies, (tx, commands) => core.insert(tx, commands)),
    submitWindows: submitWindowStore(engine.submitWindows, submitTransaction),
  });
  // The capabilities only where the engine has them: an absent one stays absent (`'wakeups' in
  // store` is false).
  const capabilityParts: Partial<Record<keyof CommandStore<Tx>, unknown>> = {
    wakeups: engine.wakeups,
    revocations: engine.revocations,
    cleanupHorizon: engine.cleanupHorizon,
  };
  for (const [key, value] of Object.entries(capabilityParts)) {
    if (value !== undefined)
      Object.defineProperty(store, key, { value, enumerable: true, configurable: true });
  }
  if (extra !== undefined) Object.defineProperties(store, Object.getOwnPropertyDescriptors(extra));
  return store as CheckedStore<Tx, Engine> & Extra;
}

function checkedCommitRiding<Tx>(
  riding: CommitRidingEngine<Tx> | null,
  input: StoreInput,
): StoreCapabilities<Tx>['commitRiding'] {
  if (riding === null) return null;
  return {
    claimById(tx, params) {
      const claim = input.claimById(params);
      // No types to claim: settled at once, like claimById's null.
      return claim === null ? Promise.resolve(null) : riding.claimById(tx, claim);
    },
    notify: (tx) => riding.notify(tx),
  };
}

function checkedCompletion<Tx>(
  engine: TransactionalCompletionEngine<Tx>,
  input: StoreInput,
): TransactionalCompletion<Tx> {
  const atCommit = engine.completeAtCommit?.bind(engine);
  const claimLost = engine.claimLost?.bind(engine);
  return {
    async complete(tx, attempt) {
      const [checked] = input.completedAttempts([attempt]);
      if (checked === undefined) throw new InvalidArgumentError('complete takes one attempt');
      return engine.complete(tx, checked);
    },
    async succeededUnder(ref) {
      const [checked] = input.refs([ref]);
      if (checked === undefined) throw new InvalidArgumentError('succeededUnder takes one claim');
      return engine.succeededUnder(checked);
    },
    isTransient: (error) => engine.isTransient(error),
    ...(engine.throughSqlExecutor !== undefined && { throughSqlExecutor: engine.throughSqlExecutor }),
    ...(atCommit !== undefined &&
      claimLost !== undefined && {
        completeAtCommit: (tx, attempt) => {
          const [checked] = input.completedAttempts([attempt]);
          if (checked === undefined) throw new InvalidArgumentError('completeAtCommit takes one attempt');
          return atCommit(tx, checked);
        },
        claimLost,
      }),
    ...(engine.savepoints !== undefined && { savepoints: checkedSavepoints(engine.savepoints, input) }),
  };
}

/** A savepoint's name as the runtime makes them: an identifier no quoting can be needed for. */
const SAVEPOINT_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

function requireSavepointName(name: string): string {
  if (typeof name !== 'string' || !SAVEPOINT_NAME.test(name)) {
    throw new InvalidArgumentError('a savepoint name is lower-case letters, digits and underscores');
  }
  return name;
}

function checkedSavepoints<Tx>(engine: SavepointsEngine<Tx>, input: StoreInput): AttemptSavepoints<Tx> {
  return {
    open: async (tx, name) => engine.open(tx, requireSavepointName(name)),
    rollbackTo: async (tx, name) => engine.rollbackTo(tx, requireSavepointName(name)),
    async completeAll(tx, attempts) {
      const checked = input.completedAttempts(attempts);
      return checked.length === 0 ? [] : engine.completeAll(tx, checked);
    },
    ...(engine.failed !== undefined && { failed: engine.failed.bind(engine) }),
  };
}

function checkedSchedules(engine: ScheduleEngine, input: StoreInput): ScheduleStore {
  return {
    async declare(definitions, now) {
      const checked = definitions.map(requireScheduleDefinition);
      return engine.declare(checked, requireStoredTime('now', now));
    },
    list: () => engine.list(),
    async get(name) {
      return engine.get(requireScheduleName(name));
    },
    async setPaused(name, paused, now) {
      const key = requireScheduleName(name);
      return engine.setPaused(key, paused, requireStoredTime('now', now));
    },
    async enqueueTick(tick) {
      const schedule = requireScheduleName(tick.schedule);
      const at = requireStoredTime('tick', requireDate('tick', tick.tick));
      return engine.enqueueTick({ schedule, tick: at, command: input.command(tick.command) });
    },
    async remove(name) {
      return engine.remove(requireScheduleName(name));
    },
    async add(definition, settings, now) {
      const checked = requireScheduleDefinition(definition);
      return engine.add(checked, settings, requireStoredTime('now', now));
    },
  };
}
