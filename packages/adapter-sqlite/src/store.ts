import { AsyncLocalStorage } from 'node:async_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import * as E from 'fp-ts/lib/Either.js';
import {
  InvalidArgumentError,
  isSqlExecutor,
  TRANSITION_SOURCES,
  TransactionRolledBackError,
  optionalInstance,
  requireInstant,
  requireId,
  requireInt,
  requireToken,
  requireTypes,
  validateIdentifier,
  type MigrationScript,
  type MigrationScriptOptions,
} from '@asynccmd/core';
import {
  byClaimOrder,
  claimWithinLimits,
  compareIds,
  guardedTransition,
  inCallersOrder,
  insertIdempotently,
  keyHeldBy,
  listPage,
  outcomeCountsFromRows,
  StoreInput,
  typeLimitStore,
  typePauseStore,
} from '@asynccmd/core/store-kit';
import type { CheckedCommand, GuardedAttempt, OutcomeCountRow } from '@asynccmd/core/store-kit';
import type * as Port from '@asynccmd/core';
import {
  insertIdempotentThroughExecutor,
  insertThroughExecutor,
  replacePendingThroughExecutor,
} from './executor-insert.js';
import { appliedVersions, migrationScript, runMigrations } from './migrations.js';
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

export function createSqliteStore(options: SqliteStoreOptions): SqliteCommandStore {
  return new SqliteCommandStore(options);
}

/** What `withoutBusyWait` answers when the database was locked. */
const BUSY: unique symbol = Symbol('SQLITE_BUSY');

/** Rows per multi-row INSERT: 7 parameters each stays far below SQLite's 32766-variable limit. */
const INSERT_CHUNK = 500;

/**
 * The store port on SQLite. better-sqlite3 is synchronous, so each operation is one statement that
 * runs to completion; the only thing to coordinate is `transaction`, which stays open across awaits:
 * while it is open on the store's handle, the store's other operations wait for it instead of
 * slipping into it (unless they are called from inside it).
 */
export class SqliteCommandStore implements Port.CommandStore<SqliteDatabase> {
  readonly dialect = 'sqlite';
  readonly capabilities: Port.StoreCapabilities<SqliteDatabase>;
  /** Other connections' commits, seen by a polled probe (wakeups.ts); none on an in-memory database. */
  readonly wakeups: SqliteWakeups | undefined;
  readonly table: string;
  readonly db: SqliteDatabase;
  private readonly owned: boolean;
  private readonly sql: SqliteSql;
  private readonly input: StoreInput;
  private readonly busyTimeoutMs: number;
  private readonly statements = new WeakMap<SqliteDatabase, Map<string, Database.Statement>>();
  private readonly context = new AsyncLocalStorage<object>();
  private openTx: { readonly marker: object; readonly done: Promise<void> } | null = null;
  readonly schedules: SqliteScheduleStore;
  readonly typeLimits: Port.TypeLimitStore = typeLimitStore(
    (limits) =>
      this.run(() =>
        this.db.transaction(() => {
          for (const l of limits) this.stmt('typeLimitDeclare').run(l.type, l.maxRunning);
        })(),
      ),
    () => this.run(() => this.stmt('typeLimitList').all() as { type: string; maxRunning: number }[]),
  );
  readonly typePauses: Port.TypePauseStore = typePauseStore({
    insert: (type, reason) => this.run(() => this.stmt('typePause').run(type, reason).changes === 1),
    remove: (type) => this.run(() => this.stmt('typeResume').run(type).changes === 1),
    read: () =>
      this.run(() =>
        (this.stmt('typePauseList').all() as { type: string; pausedAt: number; reason: string | null }[]).map(
          (r) => ({ type: r.type, pausedAt: new Date(r.pausedAt), reason: r.reason }),
        ),
      ),
  });

  constructor(options: SqliteStoreOptions) {
    const table = validateIdentifier('table', options.table ?? DEFAULT_TABLE);
    if (E.isLeft(table)) throw table.left;
    this.table = table.right;
    this.sql = sqliteSql(this.table);
    this.input = new StoreInput({ maxPayloadBytes: options.maxPayloadBytes });
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
      commandParams: (c) => insertParams(this.input.command(c)),
    });
    this.wakeups = this.db.memory ? undefined : new SqliteWakeups(this.db);
    this.capabilities = {
      skipLocked: false,
      wakeups: this.wakeups !== undefined,
      revocations: false,
      sqlExecutor: true,
      commitRiding: null,
    };
  }

  async migrate(): Promise<void> {
    return this.run(() => {
      runMigrations(this.db, this.table, Date.now);
    });
  }

  async migrationScript(options: MigrationScriptOptions = {}): Promise<MigrationScript> {
    return this.run(() =>
      migrationScript(this.table, options.all === true ? new Set() : appliedVersions(this.db, this.table)),
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
    commands: readonly Port.NewCommand[],
  ): Promise<Port.CommandId[]> {
    const rows = this.input.commands(commands).map(insertParams);
    if (rows.length === 0) return [];
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
    command: Port.NewCommand & { readonly bizKey: string },
    options?: Port.IdempotentInsertOptions,
  ): Promise<Port.InsertResult> {
    const checked = this.input.idempotentCommand(command);
    const onPending = this.input.onPending(options);
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

  async claimDue(params: Port.ClaimDueParams): Promise<Port.ClaimedCommand[]> {
    const limit = requireInt('limit', params.limit, 0);
    const types = requireTypes(params.types);
    const claim = {
      token: requireToken(params.token),
      leaseMs: requireInt('leaseMs', params.leaseMs, 1),
      now: instant('now', params.now),
      types: JSON.stringify(types),
      limit,
      instance: optionalInstance(params.instance),
    };
    if (limit === 0 || types.length === 0) return [];
    if (params.limitedTypes === undefined || params.limitedTypes.length === 0) {
      return this.run(() => this.claimRows('claimDue', claim));
    }
    return claimWithinLimits(types, params.limitedTypes, limit, {
      claimLimited: (type, max) =>
        this.run(() => this.claimRows('claimDueLimited', { ...claim, type, limit: max })),
      claimOthers: (others, max) =>
        this.run(() => this.claimRows('claimDue', { ...claim, types: JSON.stringify(others), limit: max })),
    });
  }

  private claimRows(
    statement: 'claimDue' | 'claimDueLimited',
    claim: ClaimWrites & Record<string, unknown>,
  ): Port.ClaimedCommand[] {
    const rows = this.stmt(statement).raw(true).all(claim) as unknown[][];
    return rows.map((row) => toRecordFromClaim(row, claim)).sort(byClaimOrder) as Port.ClaimedCommand[];
  }

  async claimById(params: Port.ClaimByIdParams): Promise<Port.ClaimedCommand | null> {
    const claim = {
      id: toKey(params.id),
      token: requireToken(params.token),
      leaseMs: requireInt('leaseMs', params.leaseMs, 1),
      now: instant('now', params.now),
      types: params.types === undefined ? null : JSON.stringify(requireTypes(params.types)),
      instance: optionalInstance(params.instance),
    };
    const limited = params.limitedTypes === undefined ? [] : requireTypes(params.limitedTypes);
    return this.run(() => {
      const row = (
        limited.length === 0
          ? this.stmt('claimById').raw(true).get(claim)
          : this.stmt('claimByIdLimited')
              .raw(true)
              .get({ ...claim, limited: JSON.stringify(limited) })
      ) as unknown[] | undefined;
      return row ? (toRecordFromClaim(row, claim) as Port.ClaimedCommand) : null;
    });
  }

  async heartbeat(refs: readonly Port.ClaimRef[], leaseMs: number): Promise<Port.ClaimRef[]> {
    const lease = this.input.leaseMs(leaseMs);
    if (refs.length === 0) return [];
    const json = refsJson(this.input.refs(refs));
    return this.run(() => {
      const held = this.stmt('heartbeat').all({ refs: json, leaseMs: lease }) as Port.ClaimRef[];
      const live = new Set(held.map((r) => `${r.id} ${r.token}`));
      return refs.filter((r) => live.has(`${r.id} ${r.token}`));
    });
  }

  /**
   * One UPDATE, and in the same transaction a read back only when it changed fewer rows than there
   * are ids: the commonest write of all returns nothing (each returned id cost more than its row's
   * update). All of them changed: all are done. Fewer: those now SUCCESS under the same claim are
   * done, by this complete or an earlier one of the claim.
   */
  async complete(attempts: readonly Port.CompletedAttempt[]): Promise<Port.CommandId[]> {
    const checked = this.input.completedAttempts(attempts);
    if (checked.length === 0) return [];
    const bound = { refs: refsJson(checked) };
    const asked = [...new Set(checked.map((r) => r.id))];
    const withResults = checked.filter((a) => a.resultJson !== undefined);
    const completeAll = (): Port.CommandId[] => {
      const changed = this.stmt('complete').run(bound).changes;
      if (withResults.length > 0) {
        // The id as its decimal literal (read back exactly), the result as a JSON string value.
        const results = withResults.map(
          (a) => `[${a.id},${JSON.stringify([a.token, a.resultJson]).slice(1)}`,
        );
        this.stmt('storeResults').run({ results: `[${results.join(',')}]` });
      }
      if (changed === asked.length) return asked;
      return inCallersOrder(asked, this.stmt('completedBefore').pluck().all(bound) as string[]);
    };
    return this.run(() => this.db.transaction(completeAll)());
  }

  async release(refs: readonly Port.ClaimRef[]): Promise<Port.CommandId[]> {
    return this.fencedBatch('release', refs);
  }

  async releaseRevoked(refs: readonly Port.ClaimRef[]): Promise<Port.CommandId[]> {
    return this.fencedBatch('releaseRevoked', refs);
  }

  async fail(attempts: readonly Port.FailedAttempt[]): Promise<Port.CommandId[]> {
    const checked = this.input.failedAttempts(attempts);
    const rows = checked.map((a) => {
      // The id as its decimal literal, as refsJson writes it: SQLite reads it back exactly.
      const rest = JSON.stringify([a.token, a.status, a.retryCount, a.nextRunAt.getTime(), a.lastError]);
      return `[${a.id},${rest.slice(1)}`;
    });
    if (rows.length === 0) return [];
    const json = `[${rows.join(',')}]`;
    return this.run(() => {
      const done = this.stmt('fail').pluck().all({ attempts: json }) as string[];
      if (done.length < new Set(checked.map((a) => a.id)).size) {
        done.push(...(this.stmt('failedBefore').pluck().all({ attempts: json }) as string[]));
      }
      return inCallersOrder(
        checked.map((a) => a.id),
        done,
      );
    });
  }

  async reclaimHung(params: Port.ReclaimParams): Promise<Port.ReclaimedCommand[]> {
    const reclaim = this.input.reclaim(params);
    if (reclaim === null) return [];
    return this.run(() => this.stmt('reclaimHung').all(reclaim) as Port.ReclaimedCommand[]);
  }

  async retry(id: Port.CommandId, now: Date): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('retry', id, { now: this.input.adminNow(now).getTime() });
  }

  async requeue(id: Port.CommandId, now: Date): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('requeue', id, { now: this.input.adminNow(now).getTime() });
  }

  async kill(id: Port.CommandId, reason?: string): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('kill', id, { reason: this.input.reason(reason) });
  }

  async cancel(id: Port.CommandId, reason?: string): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('cancel', id, { reason: this.input.reason(reason) });
  }

  async get(id: Port.CommandId): Promise<Port.CommandRecord | null> {
    const key = BigInt(this.input.id(id));
    return this.run(() => {
      const row = this.stmt('get').get(key) as CommandRow | undefined;
      return row ? toRecord(row) : null;
    });
  }

  async getMany(ids: readonly Port.CommandId[]): Promise<Port.CommandRecord[]> {
    const keys = this.input.ids(ids);
    if (keys.length === 0) return [];
    return this.run(() => {
      const rows = this.stmt('getMany').all(`[${keys.join(',')}]`) as CommandRow[];
      return rows.map(toRecord);
    });
  }

  async list(query: Port.ListQuery): Promise<Port.ListPage> {
    const { limit, fetch, statuses, type, bizKey, after } = this.input.list(query);
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
    };
    // Only the parameters the statement names may be bound.
    const params = Object.fromEntries(Object.entries(conditions).filter(([, v]) => v !== null));
    const shape = `list:${Object.keys(params).join(',')}`;
    return this.run(() => {
      const stmt = this.prepare(this.db, shape, () => this.sql.list(filter));
      return listPage(stmt.all({ ...params, limit: fetch }) as CommandRow[], limit, toRecord);
    });
  }

  async stats(now: Date): Promise<Port.StoreStats> {
    const at = this.input.instant('now', now).getTime();
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
    const { now, deadLetterLimit } = this.input.healthProbe(params);
    return this.run(() => {
      const deadLetters = this.stmt('deadLettersUpTo').pluck().get(deadLetterLimit) as number;
      const oldest = this.stmt('oldestDue').pluck().get(now.getTime()) as number | null;
      return { deadLetters, oldestDueAt: oldest === null ? null : new Date(oldest) };
    });
  }

  async outcomeCounts(params: Port.OutcomeCountParams): Promise<Port.OutcomeCount[]> {
    const { from, to, latencyBoundsMs } = this.input.outcomeCounts(params);
    return this.run(() => {
      const rows = this.stmt('outcomeCounts').all({
        from: from.getTime(),
        to: to.getTime(),
        bounds: JSON.stringify(latencyBoundsMs),
      }) as OutcomeCountRow[];
      return outcomeCountsFromRows(rows);
    });
  }

  async purge(params: Port.PurgeParams): Promise<number> {
    const purge = this.input.purge(params);
    if (purge === null) return 0;
    const bound = {
      olderThan: purge.olderThan.getTime(),
      statuses: JSON.stringify(purge.statuses),
      limit: purge.limit,
    };
    return this.run(() => this.stmt('purge').run(bound).changes);
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
      // SQLITE_BUSY and its extended codes (SQLITE_BUSY_SNAPSHOT, …): a sync transaction rolled back.
      if (String((e as { code?: unknown }).code).startsWith('SQLITE_BUSY')) return BUSY;
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
    refs: readonly Port.ClaimRef[],
  ): Promise<Port.CommandId[]> {
    const checked = this.input.refs(refs);
    if (checked.length === 0) return [];
    const json = refsJson(checked);
    return this.run(() => {
      const done = this.stmt(name).pluck().all({ refs: json }) as string[];
      return inCallersOrder(
        checked.map((r) => r.id),
        done,
      );
    });
  }

  /** One guarded UPDATE … RETURNING; when it matches nothing, the row's status says why. */
  private async adminTransition(
    name: Port.AdminTransition,
    id: Port.CommandId,
    params: Record<string, string | number | null>,
  ): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    const key = BigInt(this.input.id(id));
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
        const current = this.stmt('get').get(key) as CommandRow | undefined;
        return { unmatched: current ? (current.status as Port.CommandStatus) : null };
      }),
    );
  }

  /** The unfinished command holding the (type, bizKey) of command `key`, if any. */
  private keyHolder(key: bigint): string | null {
    const row = this.stmt('get').get(key) as CommandRow | undefined;
    const holder = row
      ? (this.stmt('activeHolder').pluck().get(row.type, row.biz_key) as string | undefined)
      : undefined;
    return holder ?? null;
  }
}

// ── encoding ─────────────────────────────────────────────────────────────────────────────────────

/** Ids are bound as BigInt so the 64-bit integer column compares exactly. */
function toKey(id: unknown): bigint {
  return BigInt(requireId(id));
}

/** A time only compared with, in epoch milliseconds. */
function instant(what: string, value: unknown): number {
  return requireInstant(what, value).getTime();
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
