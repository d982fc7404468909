import { AsyncLocalStorage } from 'node:async_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import * as E from 'fp-ts/lib/Either.js';
import {
  InvalidArgumentError,
  isSqlExecutor,
  TransactionRolledBackError,
  requireInt,
  type MigrationScript,
} from '@asynccmd/core';
import {
  byClaimOrder,
  claimWithinKeyLimits,
  inTurns,
  namesKeyLimits,
  planKeyRateClaim,
  asKeyRateCandidates,
  keyedCandidatesNow,
  keyWeightsJson,
  KeyWeightsCache,
  keyRateTake,
  runningPerKey,
  type KeyedCandidate,
  type KeyedRead,
  type KeyPriorityHead,
  type KeyRateBucketRow,
  claimWithinLimits,
  compareIds,
  guardedTransition,
  inCallersOrder,
  insertIdempotently,
  keyHeldBy,
  listPage,
  outcomeCountsFromRows,
  checkedStore,
  completeEach,
  runMigrations,
  TRANSITION_SOURCES,
  validateIdentifier,
} from '@asynccmd/core/store-kit';
import type {
  CheckedClaimById,
  CheckedClaimDue,
  CheckedCommand,
  CheckedCompletedAttempt,
  CheckedFailedAttempt,
  CheckedListQuery,
  CheckedPurge,
  CheckedReclaim,
  DependencyEngine,
  EngineCapabilities,
  GuardedAttempt,
  OutcomeCountRow,
  StoreEngine,
  TransactionalCompletionEngine,
  TypeLimitStatements,
  KeyLimitStatements,
  KeyRateLimitStatements,
  TypePauseStatements,
  RateLimitStatements,
  SubmitWindowStatements,
} from '@asynccmd/core/store-kit';
import { sqliteSubmitWindowStatements, submitWindowSql } from './submit-windows.js';
import type * as Port from '@asynccmd/core';
import {
  insertIdempotentThroughExecutor,
  insertThroughExecutor,
  replacePendingThroughExecutor,
} from './executor-insert.js';
import { sqliteDependencyEngine } from './dependencies.js';
import { appliedVersions, MIGRATIONS, migrationScript, sqliteMigrationEngine } from './migrations.js';
import { sqliteRateLimitStatements } from './rate-limits.js';
import { SqliteScheduleStore } from './schedules.js';
import { toRecord, toRecordFromClaim } from './rows.js';
import type { ClaimWrites, CommandRow } from './rows.js';
import { sqliteSql } from './sql.js';
import type { ListFilter, SqliteSql } from './sql.js';
import { SqliteWakeups } from './wakeups.js';

export type SqliteDatabase = Database.Database;

export interface SqliteStoreOptions {
  /** A database file (or ':memory:'): the store opens its own connection and closes it on close(). */
  readonly filename?: string;
  /**
   * An open better-sqlite3 handle to share (required for ':memory:' when the application writes to
   * the same database). The store never closes it; configure it with `configureConnection`.
   */
  readonly database?: SqliteDatabase;
  /** Table name; default `async_command`. Must be a plain identifier. */
  readonly table?: string;
  /** Largest payload accepted, in UTF-8 bytes of its JSON; default 64 KiB. */
  readonly maxPayloadBytes?: number;
  /** How long a write waits for another connection's lock; default 5000 ms. */
  readonly busyTimeoutMs?: number;
}

export const DEFAULT_TABLE = 'async_command';

/** Connection settings for concurrent use: WAL, a busy timeout, and NORMAL sync (safe under WAL). */
export function configureConnection(db: SqliteDatabase, busyTimeoutMs = 5000): void {
  if (!db.memory) db.pragma('journal_mode = WAL');
  db.pragma(`busy_timeout = ${requireInt('busyTimeoutMs', busyTimeoutMs, 0)}`);
  db.pragma('synchronous = NORMAL');
}

/** The store port on SQLite, and the database and table it works on. */
export type SqliteCommandStore = Port.CommandStore<SqliteDatabase> &
  Required<
    Pick<
      Port.CommandStore<SqliteDatabase>,
      | 'migrationScript'
      | 'schedules'
      | 'typeLimits'
      | 'typePauses'
      | 'rateLimits'
      | 'keyLimits'
      | 'keyRateLimits'
      | 'transactionalCompletion'
    >
  > & {
    readonly table: string;
    readonly db: SqliteDatabase;
  };

export function createSqliteStore(options: SqliteStoreOptions): SqliteCommandStore {
  const engine = new SqliteEngine(options);
  return checkedStore<SqliteDatabase, SqliteEngine, Pick<SqliteEngine, 'table' | 'db'>>(
    engine,
    { maxPayloadBytes: options.maxPayloadBytes },
    { table: engine.table, db: engine.db },
  );
}

/** What `withoutBusyWait` answers when the database was locked. */
const BUSY: unique symbol = Symbol('SQLITE_BUSY');

/** Rows per multi-row INSERT: 7 parameters each stays far below SQLite's 32766-variable limit. */
const INSERT_CHUNK = 500;

/**
 * The store engine on SQLite (checkedStore checks its input). better-sqlite3 is synchronous, so each operation is one statement that
 * runs to completion; the only thing to coordinate is `transaction`, which stays open across awaits:
 * while it is open on the store's handle, the store's other operations wait for it instead of
 * slipping into it (unless they are called from inside it).
 */
class SqliteEngine implements StoreEngine<SqliteDatabase> {
  readonly dialect = 'sqlite';
  readonly capabilities: EngineCapabilities<SqliteDatabase>;
  readonly transactionHandle = {
    name: 'a better-sqlite3 database',
    is: (candidate: object): boolean => {
      const database = candidate as { prepare?: unknown; transaction?: unknown };
      return typeof database.prepare === 'function' && typeof database.transaction === 'function';
    },
  };
  /** Other connections' commits, seen by a polled probe (wakeups.ts); none on an in-memory database. */
  readonly wakeups: SqliteWakeups | undefined;
  readonly table: string;
  readonly db: SqliteDatabase;
  private readonly owned: boolean;
  private readonly sql: SqliteSql;
  private readonly busyTimeoutMs: number;
  private readonly statements = new WeakMap<SqliteDatabase, Map<string, Database.Statement>>();
  private readonly context = new AsyncLocalStorage<object>();
  private openTx: { readonly marker: object; readonly done: Promise<void> } | null = null;
  readonly schedules: SqliteScheduleStore;
  readonly rateLimits: RateLimitStatements;
  readonly dependencies: DependencyEngine<SqliteDatabase>;
  readonly submitWindows: SubmitWindowStatements<SqliteDatabase>;
  /** The weights of fair-share types, parsed once per stored text. */
  private readonly keyWeights = new KeyWeightsCache();
  readonly typeLimits: TypeLimitStatements = {
    write: (limits) =>
      this.run(() =>
        this.db.transaction(() => {
          for (const l of limits) this.stmt('typeLimitDeclare').run(l.type, l.maxRunning);
        })(),
      ),
    read: () => this.run(() => this.stmt('typeLimitList').all() as { type: string; maxRunning: number }[]),
  };
  readonly keyLimits: KeyLimitStatements = {
    write: (limits) =>
      this.run(() =>
        this.db.transaction(() => {
          for (const l of limits)
            this.stmt('keyLimitDeclare').run(l.type, l.keyField, l.maxRunning, keyWeightsJson(l));
          this.declareKeyFields(limits);
        })(),
      ),
    read: () =>
      this.run(
        () =>
          this.stmt('keyLimitList').all() as {
            type: string;
            keyField: string;
            maxRunning: number;
            weightsJson: string | null;
          }[],
      ),
    reader: (type, now) => {
      const reader = this.keyedReader(type, now.getTime());
      return {
        heads: (countRunning) => this.run(() => reader.heads(countRunning)),
        rows: (reads) => this.run(() => reader.rows(reads)),
      };
    },
  };
  readonly keyRateLimits: KeyRateLimitStatements = {
    write: (limits) =>
      this.run(() =>
        this.db.transaction(() => {
          for (const l of limits) {
            this.stmt('keyRateDeclare').run(l.type, l.keyField, l.maxStarts, l.periodMs, l.burst);
          }
          this.declareKeyFields(limits);
        })(),
      ),
    read: () =>
      this.run(
        () =>
          this.stmt('keyRateList').all() as {
            type: string;
            keyField: string;
            maxStarts: number;
            periodMs: number;
            burst: number;
          }[],
      ),
  };
  readonly typePauses: TypePauseStatements = {
    insert: (type, reason) => this.run(() => this.stmt('typePause').run(type, reason).changes === 1),
    remove: (type) => this.run(() => this.stmt('typeResume').run(type).changes === 1),
    read: () =>
      this.run(() =>
        (this.stmt('typePauseList').all() as { type: string; pausedAt: number; reason: string | null }[]).map(
          (r) => ({ type: r.type, pausedAt: new Date(r.pausedAt), reason: r.reason }),
        ),
      ),
  };

  /**
   * On SQLite the caller's transaction holds the database's one write lock from BEGIN IMMEDIATE:
   * nothing else can change the row between this completion and the COMMIT.
   */
  readonly transactionalCompletion: TransactionalCompletionEngine<SqliteDatabase> = {
    complete: async (tx, checked) => {
      // An ORM's transaction is on a connection of its own to the file: the store cannot complete
      // there (SQLite has one writer, and the store's claims hold its handle).
      if (isSqlExecutor(tx) || tx !== this.db || !tx.inTransaction) {
        throw new InvalidArgumentError(
          "a completion in a transaction needs an open transaction on the store's own database handle",
        );
      }
      const bound = { id: toKey(checked.id), token: checked.token, result: checked.resultJson ?? null };
      const moved = this.stmt('moveOne').run(bound).changes === 1;
      if (moved) this.stmt('dropOne').run(bound);
      const done = moved || this.stmt('completeInTransaction').run(bound).changes === 1;
      // The caller's transaction holds the write lock: a claim woken now reads after its COMMIT.
      this.wakeups?.settled([checked.id], done);
      return done;
    },
    succeededUnder: async (checked) => {
      const bound = { id: toKey(checked.id), token: checked.token };
      return this.run(() => this.stmt('succeededUnder').get(bound) !== undefined);
    },
    // No connection to lose, and the write lock is held from BEGIN IMMEDIATE, so no statement in
    // the transaction meets a deadlock: the one loss is a BEGIN that did not get the lock within
    // the busy timeout (other writers held it), before any of the attempt's statements ran.
    isTransient: (error) => isBusy(error),
    // Names are checked identifiers (core checked-store); the write lock is the transaction's.
    savepoints: {
      open: async (tx, name) => {
        this.refuseUnlessOwnTransaction(tx);
        tx.exec(`SAVEPOINT ${name}`);
      },
      rollbackTo: async (tx, name) => {
        this.refuseUnlessOwnTransaction(tx);
        tx.exec(`ROLLBACK TO SAVEPOINT ${name}`);
      },
      completeAll: (tx, checked) => completeEach(this.transactionalCompletion.complete, tx, checked),
    },
  };

  private refuseUnlessOwnTransaction(tx: SqliteDatabase): void {
    if (tx !== this.db || !tx.inTransaction) {
      throw new InvalidArgumentError(
        "a savepoint needs an open transaction on the store's own database handle",
      );
    }
  }

  constructor(options: SqliteStoreOptions) {
    const table = validateIdentifier('table', options.table ?? DEFAULT_TABLE);
    if (E.isLeft(table)) throw table.left;
    this.table = table.right;
    this.sql = sqliteSql(this.table);
    this.busyTimeoutMs = requireInt('busyTimeoutMs', options.busyTimeoutMs ?? 5000, 0);
    if ((options.filename === undefined) === (options.database === undefined)) {
      throw new InvalidArgumentError('give the SQLite store exactly one of `filename` or `database`');
    }
    if (options.database) {
      this.db = options.database;
      this.owned = false;
    } else {
      this.db = new Database(options.filename as string);
      this.owned = true;
      configureConnection(this.db, this.busyTimeoutMs);
    }
    this.schedules = new SqliteScheduleStore({
      db: this.db,
      table: this.table,
      run: (op) => this.run(op),
      commandParams: insertParams,
    });
    this.rateLimits = sqliteRateLimitStatements(this.db, this.table, (op) => this.run(op));
    this.wakeups = this.db.memory ? undefined : new SqliteWakeups(this.db);
    // A dependant cancelled by its dependency fires the release triggers again (dependencies.ts).
    this.db.pragma('recursive_triggers = ON');
    this.dependencies = sqliteDependencyEngine(this.db, this.table, (op) => this.run(op));
    const windowSql = submitWindowSql(this.table);
    this.submitWindows = sqliteSubmitWindowStatements(
      windowSql,
      (db, name) => this.prepare(db, name, () => windowSql[name]),
      (op) => this.run(op),
      this.db,
    );
    this.capabilities = {
      skipLocked: false,
      wakeups: this.wakeups !== undefined,
      revocations: false,
      sqlExecutor: true,
      commitRiding: null,
    };
  }

  async migrate(): Promise<void> {
    const engine = sqliteMigrationEngine(this.db, this.table, (run) => this.transaction(run));
    await runMigrations(engine, MIGRATIONS);
  }

  async migrationScript(options: { readonly all: boolean }): Promise<MigrationScript> {
    return this.run(() =>
      migrationScript(this.table, options.all ? new Set() : appliedVersions(this.db, this.table)),
    );
  }

  async transaction<T>(fn: (tx: SqliteDatabase) => Promise<T>): Promise<T> {
    if (this.insideOwnTransaction()) return this.savepoint(fn);
    const marker = {};
    const finish = await this.begin(marker);
    try {
      const result = await this.context.run(marker, () => fn(this.db));
      // SQLite rolls a transaction back by itself on some failures (SQLITE_FULL, IOERR, …), or
      // the callback ran ROLLBACK: what followed was written outside it. Say so, not "committed".
      if (!this.db.inTransaction) {
        throw new TransactionRolledBackError('the transaction was rolled back before COMMIT');
      }
      this.prepare(this.db, 'commit', () => 'COMMIT').run();
      return result;
    } catch (e) {
      if (this.db.inTransaction) this.db.exec('ROLLBACK');
      throw e;
    } finally {
      this.openTx = null;
      finish();
    }
  }

  async insert(
    tx: SqliteDatabase | Port.SqlExecutor,
    commands: readonly CheckedCommand[],
  ): Promise<Port.CommandId[]> {
    const rows = commands.map(insertParams);
    if (isSqlExecutor(tx)) return insertThroughExecutor(tx, this.sql.insertMany(1), rows);
    const insertChunks = (): Port.CommandId[] => {
      const ids: Port.CommandId[] = [];
      for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
        const chunk = rows.slice(i, i + INSERT_CHUNK);
        const stmt = this.prepare(tx, `insert:${chunk.length}`, () => this.sql.insertMany(chunk.length));
        const inserted = (stmt.pluck().all(...chunk.flat()) as string[]).sort(compareIds);
        ids.push(...inserted);
      }
      return ids;
    };
    // One statement is atomic on its own; several must commit together (a savepoint inside a caller's transaction).
    return rows.length <= INSERT_CHUNK ? insertChunks() : tx.transaction(insertChunks).immediate();
  }

  async insertIdempotent(
    tx: SqliteDatabase | Port.SqlExecutor,
    checked: CheckedCommand & { readonly bizKey: string },
    onPending: Port.OnPending,
  ): Promise<Port.InsertResult> {
    const params = insertParams(checked);
    const replacing =
      onPending === 'keep'
        ? null
        : {
            statement: this.sql.replacePending(onPending === 'replace'),
            values: replaceParams(checked, onPending),
          };
    if (isSqlExecutor(tx)) {
      const { insertIdempotent, activeHolder } = this.sql;
      return insertIdempotently(checked, async () => {
        if (replacing !== null) {
          const replaced = await replacePendingThroughExecutor(tx, replacing.statement, replacing.values);
          if (replaced !== null) return replaced;
        }
        return insertIdempotentThroughExecutor(tx, insertIdempotent, activeHolder, params, checked);
      });
    }
    const insert = this.prepare(tx, 'insertIdempotent', () => this.sql.insertIdempotent).pluck();
    const holder = this.prepare(tx, 'activeHolder', () => this.sql.activeHolder).pluck();
    const insertOrFind = (): Port.InsertResult | null => {
      const id = insert.get(...params) as string | undefined;
      if (id !== undefined) return { id, duplicate: false, replaced: false };
      const existing = holder.get(checked.type, checked.bizKey) as string | undefined;
      return existing === undefined ? null : { id: existing, duplicate: true, replaced: false };
    };
    if (replacing !== null) {
      const replace = this.prepare(tx, `replacePending:${onPending}`, () => replacing.statement).pluck();
      // The replace, then the insert or look-up when nothing PENDING matched, under one write lock
      // (a savepoint inside the caller's transaction): no other writer comes in between.
      const replaceOrInsert = tx.transaction((): Port.InsertResult | null => {
        const id = replace.get(...replacing.values) as string | undefined;
        return id !== undefined ? { id, duplicate: true, replaced: true } : insertOrFind();
      });
      return insertIdempotently(checked, async () => replaceOrInsert.immediate());
    }
    // Outside a transaction the holder may finish between the two statements: then insert again.
    return insertIdempotently(checked, async () => insertOrFind());
  }

  async claimDue(params: CheckedClaimDue): Promise<Port.ClaimedCommand[]> {
    const { types, limit } = params;
    const claim = {
      token: params.token,
      leaseMs: params.leaseMs,
      now: params.now.getTime(),
      types: JSON.stringify(types),
      limit,
      instance: params.instance,
    };
    if (namesKeyLimits(params)) {
      return claimWithinKeyLimits(types, params, limit, {
        claimKeyRated: (type, max) =>
          this.run(() => this.db.transaction(() => this.claimKeyRated(type, max, claim)).immediate()),
        claimKeyed: (type, max) =>
          this.run(() =>
            this.db
              .transaction(() => {
                const limit = this.stmt('keyLimitOf').get(type) as
                  { keyField: string; maxRunning: number; weightsJson: string | null } | undefined;
                if (limit === undefined) return [];
                const weights = this.keyWeights.of(limit.weightsJson);
                const picked = keyedCandidatesNow(this.keyedReader(type, claim.now), {
                  cap: limit.maxRunning,
                  limit: max,
                  nowMs: claim.now,
                  countRunning: true,
                  ...(weights === undefined ? {} : { weights }),
                });
                if (picked.length === 0) return [];
                const ids = JSON.stringify(picked.map((c) => Number(c.id)));
                const rows = this.claimRows('claimDuePicked', { ...claim, ids, limit: picked.length });
                return inTurns(rows, limit.keyField, weights);
              })
              .immediate(),
          ),
        others: (others, max) =>
          this.claimDue({ ...params, types: others, limit: max, keyedTypes: [], keyRatedTypes: [] }),
      });
    }
    if (params.limitedTypes.length === 0) return this.run(() => this.claimOfTypes(types, claim));
    return claimWithinLimits(types, params.limitedTypes, limit, {
      claimLimited: (type, max) =>
        this.run(() => this.claimRows('claimDueLimited', { ...claim, type, limit: max })),
      claimOthers: (others, max) => this.run(() => this.claimOfTypes(others, { ...claim, limit: max })),
    });
  }

  /**
   * The claim of `types` (claim.limit of them), from the claim index led by type, so no claim reads
   * another type's backlog. One type: its own ordered read. Several: the first rows of each in claim
   * order, merged, the first claim.limit of them all claimed by id, in one write transaction.
   */
  private claimOfTypes(
    types: readonly string[],
    claim: ClaimWrites & { readonly now: number; readonly limit: number } & Record<string, unknown>,
  ): Port.ClaimedCommand[] {
    if (types.length === 1) return this.claimRows('claimDue', { ...claim, type: types[0] });
    return this.db
      .transaction(() => {
        const candidates = this.stmt('claimCandidates').raw(true);
        const merged = types
          .flatMap((type) => candidates.all({ type, now: claim.now, limit: claim.limit }) as CandidateRow[])
          .sort(byCandidateOrder)
          .slice(0, claim.limit);
        if (merged.length === 0) return [];
        const ids = JSON.stringify(merged.map(([id]) => id));
        return this.claimRows('claimDuePicked', { ...claim, ids, limit: merged.length });
      })
      .immediate();
  }

  /** One keyed-rate claim of `type` (core planKeyRateClaim), inside an IMMEDIATE transaction. */
  private claimKeyRated(
    type: string,
    max: number,
    claim: ClaimWrites & Record<string, unknown>,
  ): Port.ClaimedCommand[] {
    const lock = this.stmt('keyRateLock').get(type) as
      { keyField: string; maxStarts: number; periodMs: number; burst: number; nowMs: number } | undefined;
    if (lock === undefined) return [];
    const limit = { type, ...lock };
    const candidates = asKeyRateCandidates(
      keyedCandidatesNow(this.keyedReader(type, claim['now'] as number), keyRateTake(lock.burst, lock.nowMs)),
    );
    if (candidates.length === 0) return [];
    const keys = [...new Set(candidates.flatMap((c) => (c.key === null ? [] : [c.key])))];
    const buckets =
      keys.length === 0
        ? []
        : (this.stmt('keyRateBuckets').all(type, JSON.stringify(keys)) as KeyRateBucketRow[]);
    const plan = planKeyRateClaim(limit, candidates, buckets, max);
    if (plan.picked.length === 0) return [];
    const rows = this.claimRows('claimDuePicked', {
      ...claim,
      ids: JSON.stringify(plan.picked.map(Number)),
      limit: plan.picked.length,
    });
    const spent = plan.spent(rows.map((r) => r.id));
    for (const b of spent) this.stmt('keyRateSave').run(type, b.key, b.tokens, b.refilledAtMs);
    if (spent.length > 0) this.stmt('keyRatePrune').run({ ...limit, type });
    return inTurns(rows, lock.keyField);
  }

  /** The keyed claim's reads of `type` (core keyed-reads.ts), due at `now`: inside its transaction. */
  private keyedReader(type: string, now: number) {
    return {
      heads: (countRunning: boolean) => ({
        heads: this.stmt('flowHeads').all({ type }) as KeyPriorityHead[],
        running: countRunning
          ? runningPerKey(this.stmt('flowRunning').all(type) as { key: string; n: number }[])
          : new Map<string, number>(),
      }),
      rows: (reads: readonly KeyedRead[]) =>
        reads.flatMap((r) => this.stmt('flowRows').all({ type, now, ...r }) as KeyedCandidate[]),
    };
  }

  /** The key fields of `limits` (inside their declaration's transaction), and their commands' keys from them. */
  private declareKeyFields(limits: readonly { readonly type: string; readonly keyField: string }[]): void {
    for (const l of limits) {
      this.stmt('flowKeyDeclare').run(l.type, l.keyField);
      this.stmt('flowRekey').run({ type: l.type });
    }
  }

  private claimRows(
    statement: 'claimDue' | 'claimDueLimited' | 'claimDuePicked',
    claim: ClaimWrites & Record<string, unknown>,
  ): Port.ClaimedCommand[] {
    const rows = this.stmt(statement).raw(true).all(claim) as unknown[][];
    return rows.map((row) => this.claimed(row, claim)).sort(byClaimOrder);
  }

  /** A claimed row's record; one with dependants is remembered (wakeups.ts settled). */
  private claimed(row: readonly unknown[], claim: ClaimWrites): Port.ClaimedCommand {
    const { record, hasDependants } = toRecordFromClaim(row, claim);
    if (hasDependants) this.wakeups?.claimedWithDependants(record.id);
    return record as Port.ClaimedCommand;
  }

  async claimById(params: CheckedClaimById): Promise<Port.ClaimedCommand | null> {
    const claim = {
      id: toKey(params.id),
      token: params.token,
      leaseMs: params.leaseMs,
      now: params.now.getTime(),
      types: params.types === null ? null : JSON.stringify(params.types),
      instance: params.instance,
    };
    const limited = params.limitedTypes;
    return this.run(() => {
      const row = (
        limited.length === 0
          ? this.stmt('claimById').raw(true).get(claim)
          : this.stmt('claimByIdLimited')
              .raw(true)
              .get({ ...claim, limited: JSON.stringify(limited) })
      ) as unknown[] | undefined;
      return row ? this.claimed(row, claim) : null;
    });
  }

  async heartbeat(refs: readonly Port.ClaimRef[], leaseMs: number): Promise<Port.ClaimRef[]> {
    const json = refsJson(refs);
    return this.run(() => {
      const held = this.stmt('heartbeat').all({ refs: json, leaseMs }) as Port.ClaimRef[];
      const live = new Set(held.map((r) => `${r.id} ${r.token}`));
      return refs.filter((r) => live.has(`${r.id} ${r.token}`));
    });
  }

  async reportProgress(reports: readonly Port.ProgressReport[]): Promise<Port.CommandId[]> {
    // The id as its decimal literal, as fail writes it: SQLite reads it back exactly.
    const rows = reports.map((r) => `[${r.id},${JSON.stringify([r.token, r.done, r.total]).slice(1)}`);
    return this.run(() => {
      const written = this.stmt('reportProgress')
        .pluck()
        .all({ reports: `[${rows.join(',')}]` }) as string[];
      return inCallersOrder(
        reports.map((r) => r.id),
        written,
      );
    });
  }

  /**
   * One UPDATE, and in the same transaction a read back only when it changed fewer rows than there
   * are ids: the commonest write of all returns nothing (each returned id cost more than its row's
   * update). All of them changed: all are done. Fewer: those now SUCCESS under the same claim are
   * done, by this complete or an earlier one of the claim.
   */
  async complete(checked: readonly CheckedCompletedAttempt[]): Promise<Port.CommandId[]> {
    const bound = { refs: refsJson(checked) };
    const asked = [...new Set(checked.map((r) => r.id))];
    const withResults = checked.filter((a) => a.resultJson !== undefined);
    const completeAll = (): Port.CommandId[] => {
      // Movable rows leave for the history (history.ts); the others are completed in place.
      const moved = this.stmt('moveSucceeded').run(bound).changes;
      if (moved > 0) this.stmt('dropMoved').run(bound);
      const changed = moved + (moved < asked.length ? this.stmt('complete').run(bound).changes : 0);
      if (withResults.length > 0) {
        // The id as its decimal literal (read back exactly), the result as a JSON string value.
        const results = withResults.map(
          (a) => `[${a.id},${JSON.stringify([a.token, a.resultJson]).slice(1)}`,
        );
        const bound = { results: `[${results.join(',')}]` };
        if (moved > 0) this.stmt('storeResults').run(bound);
        if (changed > moved) this.stmt('storeResultsInPlace').run(bound);
      }
      if (changed === asked.length) return asked;
      return inCallersOrder(asked, this.stmt('completedBefore').pluck().all(bound) as string[]);
    };
    const done = await this.run(() => this.db.transaction(completeAll)());
    this.wakeups?.settled(asked, true);
    return done;
  }

  async release(refs: readonly Port.ClaimRef[]): Promise<Port.CommandId[]> {
    return this.fencedBatch('release', refs);
  }

  async releaseRevoked(refs: readonly Port.ClaimRef[]): Promise<Port.CommandId[]> {
    return this.fencedBatch('releaseRevoked', refs);
  }

  async fail(checked: readonly CheckedFailedAttempt[]): Promise<Port.CommandId[]> {
    const rows = checked.map((a) => {
      // The id as its decimal literal, as refsJson writes it: SQLite reads it back exactly.
      const rest = JSON.stringify([a.token, a.status, a.retryCount, a.nextRunAt.getTime(), a.lastError]);
      return `[${a.id},${rest.slice(1)}`;
    });
    const json = `[${rows.join(',')}]`;
    const done = await this.run(() => {
      const failed = this.stmt('fail').pluck().all({ attempts: json }) as string[];
      if (failed.length < new Set(checked.map((a) => a.id)).size) {
        failed.push(...(this.stmt('failedBefore').pluck().all({ attempts: json }) as string[]));
      }
      return inCallersOrder(
        checked.map((a) => a.id),
        failed,
      );
    });
    this.wakeups?.settled(
      checked.map((a) => a.id),
      checked.some((a) => a.status === 'DEAD'),
    );
    return done;
  }

  async reclaimHung(reclaim: CheckedReclaim): Promise<Port.ReclaimedCommand[]> {
    return this.run(() => this.stmt('reclaimHung').all(reclaim) as Port.ReclaimedCommand[]);
  }

  async retry(id: Port.CommandId, now: Date): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('retry', id, { now: now.getTime() });
  }

  async requeue(id: Port.CommandId, now: Date): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('requeue', id, { now: now.getTime() });
  }

  async kill(
    id: Port.CommandId,
    reason: string | null,
  ): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('kill', id, { reason });
  }

  async cancel(
    id: Port.CommandId,
    reason: string | null,
  ): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('cancel', id, { reason });
  }

  async get(id: Port.CommandId): Promise<Port.CommandRecord | null> {
    const key = BigInt(id);
    return this.run(() => {
      const row = this.stmt('get').get({ id: key }) as CommandRow | undefined;
      return row ? toRecord(row) : null;
    });
  }

  async getMany(keys: readonly Port.CommandId[]): Promise<Port.CommandRecord[]> {
    return this.run(() => {
      const rows = this.stmt('getMany').all({ ids: `[${keys.join(',')}]` }) as CommandRow[];
      return rows.map(toRecord);
    });
  }

  async list(query: CheckedListQuery): Promise<Port.ListPage> {
    const { limit, fetch, statuses, type, bizKey, after } = query;
    const conditions = {
      status: statuses?.length === 1 ? statuses[0]! : null,
      statuses: statuses === null || statuses.length === 1 ? null : JSON.stringify(statuses),
      type,
      bizKey,
      beforeAt: after === null ? null : after.createdAt.getTime(),
      before: after === null ? null : BigInt(after.id),
    };
    const filter: ListFilter = {
      status: conditions.status !== null,
      statuses: conditions.statuses !== null,
      type: conditions.type !== null,
      bizKey: conditions.bizKey !== null,
      before: after !== null,
      history: statuses === null || statuses.includes('SUCCESS'),
    };
    // Only the parameters the statement names may be bound.
    const params = Object.fromEntries(Object.entries(conditions).filter(([, v]) => v !== null));
    const shape = `list:${Object.keys(params).join(',')}:${filter.history}`;
    return this.run(() => {
      const stmt = this.prepare(this.db, shape, () => this.sql.list(filter));
      return listPage(stmt.all({ ...params, limit: fetch }) as CommandRow[], limit, toRecord);
    });
  }

  async stats(now: Date): Promise<Port.StoreStats> {
    const at = now.getTime();
    return this.run(() => {
      const counts = this.stmt('counts').all() as {
        status: Port.CommandStatus;
        type: string;
        count: number;
      }[];
      const oldest = this.stmt('oldestDue').pluck().get(at) as number | null;
      return { counts, oldestDueAt: oldest === null ? null : new Date(oldest) };
    });
  }

  async healthProbe(params: Port.HealthProbeParams): Promise<Port.HealthProbe> {
    const { now, deadLetterLimit } = params;
    return this.run(() => {
      const deadLetters = this.stmt('deadLettersUpTo').pluck().get(deadLetterLimit) as number;
      const oldest = this.stmt('oldestDue').pluck().get(now.getTime()) as number | null;
      return { deadLetters, oldestDueAt: oldest === null ? null : new Date(oldest) };
    });
  }

  async outcomeCounts(params: Port.OutcomeCountParams): Promise<Port.OutcomeCount[]> {
    const { from, to, latencyBoundsMs } = params;
    return this.run(() => {
      const rows = this.stmt('outcomeCounts').all({
        from: from.getTime(),
        to: to.getTime(),
        bounds: JSON.stringify(latencyBoundsMs),
      }) as OutcomeCountRow[];
      return outcomeCountsFromRows(rows);
    });
  }

  async purge(purge: CheckedPurge): Promise<number> {
    const bound = {
      olderThan: purge.olderThan.getTime(),
      statuses: JSON.stringify(purge.statuses),
      limit: purge.limit,
    };
    return this.run(() =>
      this.db.transaction(() => {
        // The history holds most finished commands (SUCCESS only); the command table the few that
        // stay (history.ts). A purge of other statuses never reads the history.
        const gone = purge.statuses.includes('SUCCESS')
          ? (this.stmt('purgeHistory').pluck().all(bound) as number[])
          : [];
        if (gone.length < purge.limit) {
          const left = { ...bound, limit: purge.limit - gone.length };
          gone.push(...(this.stmt('purge').pluck().all(left) as number[]));
        }
        // Their edges and workflow steps go with them.
        if (gone.length > 0) {
          const ids = { ids: JSON.stringify(gone) };
          this.stmt('purgeEdgesAsDependant').run(ids);
          this.stmt('purgeEdgesAsDependency').run(ids);
          this.stmt('purgeSteps').run(ids);
        }
        return gone.length;
      })(),
    );
  }

  async now(): Promise<Date> {
    return this.run(() => {
      return new Date(this.stmt('now').pluck().get() as number);
    });
  }

  async ping(): Promise<void> {
    return this.run(() => {
      this.stmt('ping').get();
    });
  }

  async close(): Promise<void> {
    this.wakeups?.close();
    if (this.openTx) await this.openTx.done;
    if (this.owned && this.db.open) this.db.close();
  }

  // ── internals ──────────────────────────────────────────────────────────────────────────────────

  /**
   * Runs `op` once no transaction that this call is not part of is open on the handle. The check
   * and `op` run in the same synchronous step, so nothing can begin in between.
   *
   * Outside the store's own transaction, `op` never waits on SQLite's busy timeout: that wait
   * blocks the event loop, and when the write lock's holder is a transaction of this same process
   * on another connection (an ORM's, or another store's on the same file) it could not finish
   * meanwhile, so `op` would fail after the whole timeout. A busy `op` is tried again after a
   * pause instead, until the busy timeout has passed.
   */
  private async run<T>(op: () => T): Promise<T> {
    const deadline = Date.now() + this.busyTimeoutMs;
    for (let delay = 1; ; delay = Math.min(delay * 2, 16)) {
      while (this.db.inTransaction && !this.insideOwnTransaction()) {
        await (this.openTx?.done ?? sleep(1));
      }
      if (this.insideOwnTransaction()) return op();
      const result = this.withoutBusyWait(op);
      if (result !== BUSY) return result;
      if (Date.now() > deadline) {
        throw Object.assign(new Error('database is locked (busy timeout passed)'), { code: 'SQLITE_BUSY' });
      }
      await sleep(delay);
    }
  }

  /** BEGIN IMMEDIATE, waiting for the write lock as `run` waits. Resolves to the function that marks the transaction finished. */
  private async begin(marker: object): Promise<() => void> {
    return this.run(() => {
      this.prepare(this.db, 'begin', () => 'BEGIN IMMEDIATE').run();
      let done = (): void => undefined;
      this.openTx = { marker, done: new Promise<void>((resolve) => (done = resolve)) };
      return done;
    });
  }

  /** `op` with the busy timeout at 0; BUSY when the database was locked (`op` then wrote nothing). */
  private withoutBusyWait<T>(op: () => T): T | typeof BUSY {
    // Prepared once: this runs for every operation, and db.pragma()/exec() prepare each time.
    const timeout = this.prepare(this.db, 'busy:get', () => 'PRAGMA busy_timeout')
      .pluck()
      .get() as number;
    this.prepare(this.db, 'busy:0', () => 'PRAGMA busy_timeout = 0').run();
    try {
      return op();
    } catch (e) {
      // A sync transaction that met a busy database rolled back.
      if (isBusy(e)) return BUSY;
      throw e;
    } finally {
      this.prepare(this.db, `busy:${timeout}`, () => `PRAGMA busy_timeout = ${Math.trunc(timeout)}`).run();
    }
  }

  private insideOwnTransaction(): boolean {
    return this.openTx !== null && this.context.getStore() === this.openTx.marker;
  }

  private async savepoint<T>(fn: (tx: SqliteDatabase) => Promise<T>): Promise<T> {
    const name = `asynccmd_${Math.random().toString(36).slice(2)}`;
    this.db.exec(`SAVEPOINT ${name}`);
    try {
      const result = await fn(this.db);
      this.db.exec(`RELEASE ${name}`);
      return result;
    } catch (e) {
      this.db.exec(`ROLLBACK TO ${name}`);
      this.db.exec(`RELEASE ${name}`);
      throw e;
    }
  }

  private prepare(db: SqliteDatabase, key: string, text: () => string): Database.Statement {
    let cache = this.statements.get(db);
    if (!cache) this.statements.set(db, (cache = new Map()));
    let stmt = cache.get(key);
    if (!stmt) cache.set(key, (stmt = db.prepare(text())));
    return stmt;
  }

  private stmt(
    name: { [K in keyof SqliteSql]: SqliteSql[K] extends string ? K : never }[keyof SqliteSql],
  ): Database.Statement {
    return this.prepare(this.db, name, () => this.sql[name]);
  }

  private async fencedBatch(
    name: 'release' | 'releaseRevoked',
    checked: readonly Port.ClaimRef[],
  ): Promise<Port.CommandId[]> {
    const json = refsJson(checked);
    const done = await this.run(() => {
      const released = this.stmt(name).pluck().all({ refs: json }) as string[];
      return inCallersOrder(
        checked.map((r) => r.id),
        released,
      );
    });
    this.wakeups?.settled(
      checked.map((r) => r.id),
      false,
    );
    return done;
  }

  /** One guarded UPDATE … RETURNING; when it matches nothing, the row's status says why. */
  private async adminTransition(
    name: Port.AdminTransition,
    id: Port.CommandId,
    params: Record<string, string | number | null>,
  ): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    const key = BigInt(id);
    const bound = { ...params, id: key, sources: JSON.stringify(TRANSITION_SOURCES[name]) };
    const statement = name === 'kill' ? 'cancel' : name;
    return guardedTransition(name, String(key), () =>
      this.run((): GuardedAttempt => {
        let row: CommandRow | undefined;
        try {
          row = this.stmt(statement).get(bound) as CommandRow | undefined;
        } catch (e) {
          if (name === 'retry' && isUniqueViolation(e)) return keyHeldBy(String(key), this.keyHolder(key));
          throw e;
        }
        if (row) return { applied: toRecord(row) };
        const current = this.stmt('get').get({ id: key }) as CommandRow | undefined;
        return { unmatched: current ? (current.status as Port.CommandStatus) : null };
      }),
    );
  }

  /** The unfinished command holding the (type, bizKey) of command `key`, if any. */
  private keyHolder(key: bigint): string | null {
    const row = this.stmt('get').get({ id: key }) as CommandRow | undefined;
    const holder = row
      ? (this.stmt('activeHolder').pluck().get(row.type, row.biz_key) as string | undefined)
      : undefined;
    return holder ?? null;
  }
}

// ── encoding ─────────────────────────────────────────────────────────────────────────────────────

/** Ids are bound as BigInt so the 64-bit integer column compares exactly. */
function toKey(id: Port.CommandId): bigint {
  return BigInt(id);
}

/** Bound parameters of one inserted row, in the order of sql.ts's INSERT_ROW. */
function insertParams(c: CheckedCommand): (string | number | null)[] {
  return [
    c.type,
    c.bizKey,
    c.payloadJson,
    c.maxRetry,
    c.runAt?.getTime() ?? null,
    c.owner,
    c.headersJson,
    c.priority,
    c.orderingKey,
  ];
}

/** replacePending's parameters: the contents a PENDING holder takes, then its key. */
function replaceParams(
  c: CheckedCommand & { readonly bizKey: string },
  onPending: 'replace' | 'replace-keep-run-at',
): (string | number | null)[] {
  const runAt = onPending === 'replace' ? [c.runAt?.getTime() ?? null] : [];
  return [c.payloadJson, c.maxRetry, c.headersJson, c.priority, ...runAt, c.type, c.bizKey];
}

/** `{"token": [id, …], …}` for the fenced batch statements (sql.ts REFS); ids are checked digits. */
function refsJson(refs: readonly Port.ClaimRef[]): string {
  const byClaim = new Map<string, string[]>();
  for (const { id, token } of refs) {
    const ids = byClaim.get(token);
    if (ids === undefined) byClaim.set(token, [id]);
    else ids.push(id);
  }
  const claims: string[] = [];
  for (const [token, ids] of byClaim) claims.push(`${JSON.stringify(token)}:[${ids.join(',')}]`);
  return `{${claims.join(',')}}`;
}

function isUniqueViolation(e: unknown): boolean {
  return (e as { code?: unknown } | null)?.code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/** SQLITE_BUSY and its extended codes (SQLITE_BUSY_SNAPSHOT, …): the database was locked. */
function isBusy(error: unknown): boolean {
  return String((error as { code?: unknown } | null)?.code).startsWith('SQLITE_BUSY');
}

/** A row of claimCandidates, raw: id, priority, due time (ms). */
type CandidateRow = readonly [id: number, priority: number, nextRunAt: number];

/** Claim order: priority, then due time, then id. */
const byCandidateOrder = (a: CandidateRow, b: CandidateRow): number =>
  a[1] - b[1] || a[2] - b[2] || a[0] - b[0];
