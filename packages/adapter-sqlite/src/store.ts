import { AsyncLocalStorage } from 'node:async_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import * as E from 'fp-ts/lib/Either.js';
import {
  CommandNotFoundError,
  DEFAULT_MAX_PAYLOAD_BYTES,
  FINISHED_STATUSES,
  IdempotencyConflictError,
  InvalidArgumentError,
  TRANSITION_SOURCES,
  TransactionRolledBackError,
  checkTransition,
  decodeListCursor,
  encodeListCursor,
  optionalInstance,
  optionalReason,
  optionalText,
  requireInstant,
  requireStoredTime,
  requireHeadersJson,
  requireId,
  requireInt,
  requirePayloadJson,
  requireStatuses,
  requireFailureOutcome,
  requireHealthProbeParams,
  requireOutcomeCountParams,
  requireToken,
  requireTypes,
  rescueLimitMessage,
  truncateErrorText,
  validateIdentifier,
} from '@asynccmd/core';
import type {
  AdminError,
  AdminTransition,
  ClaimByIdParams,
  ClaimDueParams,
  ClaimedCommand,
  ClaimRef,
  CommandId,
  CommandRecord,
  CommandStatus,
  CommandStore,
  FailedAttempt,
  HealthProbe,
  HealthProbeParams,
  InsertResult,
  ListPage,
  ListQuery,
  NewCommand,
  OutcomeCount,
  OutcomeCountParams,
  PurgeParams,
  ReclaimedCommand,
  ReclaimParams,
  StoreCapabilities,
  StoreStats,
} from '@asynccmd/core';
import { runMigrations } from './migrations.js';
import { byDueThenId, compareIds, toRecord } from './rows.js';
import type { CommandRow } from './rows.js';
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

/** Rows per multi-row INSERT: 7 parameters each stays far below SQLite's 32766-variable limit. */
const INSERT_CHUNK = 500;
const ADMIN_ATTEMPTS = 3;

/**
 * The store port on SQLite. better-sqlite3 is synchronous, so each operation is one statement that
 * runs to completion; the only thing to coordinate is `transaction`, which stays open across awaits:
 * while it is open on the store's handle, the store's other operations wait for it instead of
 * slipping into it (unless they are called from inside it).
 */
export class SqliteCommandStore implements CommandStore<SqliteDatabase> {
  readonly dialect = 'sqlite';
  readonly capabilities: StoreCapabilities;
  /** Other connections' commits, seen by a polled probe (wakeups.ts); none on an in-memory database. */
  readonly wakeups: SqliteWakeups | undefined;
  readonly table: string;
  readonly db: SqliteDatabase;
  private readonly owned: boolean;
  private readonly sql: SqliteSql;
  private readonly maxPayloadBytes: number;
  private readonly busyTimeoutMs: number;
  private readonly statements = new WeakMap<SqliteDatabase, Map<string, Database.Statement>>();
  private readonly context = new AsyncLocalStorage<object>();
  private openTx: { readonly marker: object; readonly done: Promise<void> } | null = null;

  constructor(options: SqliteStoreOptions) {
    const table = validateIdentifier('table', options.table ?? DEFAULT_TABLE);
    if (E.isLeft(table)) throw table.left;
    this.table = table.right;
    this.sql = sqliteSql(this.table);
    this.maxPayloadBytes = requireInt(
      'maxPayloadBytes',
      options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
      1,
    );
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
    this.wakeups = this.db.memory ? undefined : new SqliteWakeups(this.db);
    this.capabilities = { skipLocked: false, wakeups: this.wakeups !== undefined, revocations: false };
  }

  async migrate(): Promise<void> {
    return this.run(() => {
      runMigrations(this.db, this.table, Date.now);
    });
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

  async insert(tx: SqliteDatabase, commands: readonly NewCommand[]): Promise<CommandId[]> {
    const rows = commands.map((c) => this.insertParams(c));
    if (rows.length === 0) return [];
    const insertChunks = (): CommandId[] => {
      const ids: CommandId[] = [];
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
    tx: SqliteDatabase,
    command: NewCommand & { readonly bizKey: string },
  ): Promise<InsertResult> {
    if (typeof command.bizKey !== 'string' || command.bizKey === '') {
      throw new InvalidArgumentError('an idempotent submit needs a non-empty bizKey');
    }
    const params = this.insertParams(command);
    const insert = this.prepare(tx, 'insertIdempotent', () => this.sql.insertIdempotent).pluck();
    const holder = this.prepare(tx, 'activeHolder', () => this.sql.activeHolder).pluck();
    // Outside a transaction the holder may finish between the two statements: then insert again.
    for (let attempt = 0; attempt < ADMIN_ATTEMPTS; attempt++) {
      const id = insert.get(...params) as string | undefined;
      if (id !== undefined) return { id, duplicate: false };
      const existing = holder.get(command.type, command.bizKey) as string | undefined;
      if (existing !== undefined) return { id: existing, duplicate: true };
    }
    throw new Error(`idempotent submit of (${command.type}, ${command.bizKey}) kept racing with its holder`);
  }

  async claimDue(params: ClaimDueParams): Promise<ClaimedCommand[]> {
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
    return this.run(() => {
      const rows = this.stmt('claimDue').all(claim) as CommandRow[];
      return rows.map(toRecord).sort(byDueThenId) as ClaimedCommand[];
    });
  }

  async claimById(params: ClaimByIdParams): Promise<ClaimedCommand | null> {
    const claim = {
      id: toKey(params.id),
      token: requireToken(params.token),
      leaseMs: requireInt('leaseMs', params.leaseMs, 1),
      now: instant('now', params.now),
      types: params.types === undefined ? null : JSON.stringify(requireTypes(params.types)),
      instance: optionalInstance(params.instance),
    };
    return this.run(() => {
      const row = this.stmt('claimById').get(claim) as CommandRow | undefined;
      return row ? (toRecord(row) as ClaimedCommand) : null;
    });
  }

  async heartbeat(refs: readonly ClaimRef[], leaseMs: number): Promise<ClaimRef[]> {
    const lease = requireInt('leaseMs', leaseMs, 1);
    if (refs.length === 0) return [];
    const json = refsJson(refs);
    return this.run(() => {
      const held = this.stmt('heartbeat').all({ refs: json, leaseMs: lease }) as ClaimRef[];
      const live = new Set(held.map((r) => `${r.id} ${r.token}`));
      return refs.filter((r) => live.has(`${r.id} ${r.token}`));
    });
  }

  async complete(refs: readonly ClaimRef[]): Promise<CommandId[]> {
    return this.fencedBatch('complete', refs);
  }

  async release(refs: readonly ClaimRef[]): Promise<CommandId[]> {
    return this.fencedBatch('release', refs);
  }

  async releaseRevoked(refs: readonly ClaimRef[]): Promise<CommandId[]> {
    return this.fencedBatch('releaseRevoked', refs);
  }

  async fail(attempts: readonly FailedAttempt[]): Promise<CommandId[]> {
    const rows = attempts.map(({ ref, outcome }) => {
      const o = requireFailureOutcome(outcome);
      // The id as its decimal literal, as refsJson writes it: SQLite reads it back exactly.
      const rest = JSON.stringify([
        requireToken(ref.token),
        o.status,
        o.retryCount,
        requireTime('nextRunAt', o.nextRunAt),
        truncateErrorText(o.lastError),
      ]);
      return `[${requireId(ref.id)},${rest.slice(1)}`;
    });
    if (rows.length === 0) return [];
    const json = `[${rows.join(',')}]`;
    return this.run(() => {
      const done = new Set(this.stmt('fail').pluck().all({ attempts: json }) as string[]);
      return [...new Set(attempts.map((a) => a.ref.id))].filter((id) => done.has(id));
    });
  }

  async reclaimHung(params: ReclaimParams): Promise<ReclaimedCommand[]> {
    const limit = requireInt('limit', params.limit, 0);
    const maxRescues = requireInt('maxRescues', params.maxRescues, 0);
    if (limit === 0) return [];
    return this.run(() => {
      return this.stmt('reclaimHung').all({
        limit,
        maxRescues,
        deadError: rescueLimitMessage(maxRescues),
      }) as ReclaimedCommand[];
    });
  }

  async retry(id: CommandId, now: Date): Promise<E.Either<AdminError, CommandRecord>> {
    return this.adminTransition('retry', id, { now: requireTime('now', now) });
  }

  async requeue(id: CommandId, now: Date): Promise<E.Either<AdminError, CommandRecord>> {
    return this.adminTransition('requeue', id, { now: requireTime('now', now) });
  }

  async kill(id: CommandId, reason?: string): Promise<E.Either<AdminError, CommandRecord>> {
    return this.adminTransition('kill', id, { reason: reasonText(reason) });
  }

  async cancel(id: CommandId, reason?: string): Promise<E.Either<AdminError, CommandRecord>> {
    return this.adminTransition('cancel', id, { reason: reasonText(reason) });
  }

  async get(id: CommandId): Promise<CommandRecord | null> {
    const key = toKey(id);
    return this.run(() => {
      const row = this.stmt('get').get(key) as CommandRow | undefined;
      return row ? toRecord(row) : null;
    });
  }

  async getMany(ids: readonly CommandId[]): Promise<CommandRecord[]> {
    const keys = ids.map((id) => requireId(id));
    if (keys.length === 0) return [];
    return this.run(() => {
      const rows = this.stmt('getMany').all(`[${keys.join(',')}]`) as CommandRow[];
      return rows.map(toRecord);
    });
  }

  async list(query: ListQuery): Promise<ListPage> {
    const limit = requireInt('limit', query.limit ?? 50, 1, 1000);
    const statuses = query.status === undefined ? null : requireStatuses(query.status);
    const after = query.cursor === undefined || query.cursor === null ? null : decodeListCursor(query.cursor);
    const conditions = {
      status: statuses?.length === 1 ? statuses[0]! : null,
      statuses: statuses === null || statuses.length === 1 ? null : JSON.stringify(statuses),
      type: optionalText('type', query.type),
      bizKey: optionalText('bizKey', query.bizKey),
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
      const rows = stmt.all({ ...params, limit: limit + 1 }) as CommandRow[];
      const items = rows.slice(0, limit).map(toRecord);
      const last = items[items.length - 1];
      return { items, nextCursor: rows.length > limit && last ? encodeListCursor(last) : null };
    });
  }

  async stats(now: Date): Promise<StoreStats> {
    const at = instant('now', now);
    return this.run(() => {
      const counts = this.stmt('counts').all() as { status: CommandStatus; type: string; count: number }[];
      const oldest = this.stmt('oldestDue').pluck().get(at) as number | null;
      return { counts, oldestDueAt: oldest === null ? null : new Date(oldest) };
    });
  }

  async healthProbe(params: HealthProbeParams): Promise<HealthProbe> {
    const { now, deadLetterLimit } = requireHealthProbeParams(params);
    return this.run(() => {
      const deadLetters = this.stmt('deadLettersUpTo').pluck().get(deadLetterLimit) as number;
      const oldest = this.stmt('oldestDue').pluck().get(now.getTime()) as number | null;
      return { deadLetters, oldestDueAt: oldest === null ? null : new Date(oldest) };
    });
  }

  async outcomeCounts(params: OutcomeCountParams): Promise<OutcomeCount[]> {
    const { from, to, latencyBoundsMs } = requireOutcomeCountParams(params);
    return this.run(() => {
      const rows = this.stmt('outcomeCounts').all({
        from: from.getTime(),
        to: to.getTime(),
        bounds: JSON.stringify(latencyBoundsMs),
      }) as { status: 'SUCCESS' | 'DEAD'; latency_bucket: number; count: number }[];
      return rows.map((r) => ({ status: r.status, latencyBucket: r.latency_bucket, count: r.count }));
    });
  }

  async purge(params: PurgeParams): Promise<number> {
    const statuses = params.statuses ?? ['SUCCESS', 'CANCELLED'];
    for (const s of statuses) {
      if (!FINISHED_STATUSES.includes(s)) {
        throw new InvalidArgumentError(`purge deletes only finished commands, not ${String(s)} ones`);
      }
    }
    const limit = requireInt('limit', params.limit, 0);
    const olderThan = instant('olderThan', params.olderThan);
    if (limit === 0 || statuses.length === 0) return 0;
    return this.run(() => {
      return this.stmt('purge').run({ olderThan, statuses: JSON.stringify(statuses), limit }).changes;
    });
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
   */
  private async run<T>(op: () => T): Promise<T> {
    while (this.db.inTransaction && !this.insideOwnTransaction()) {
      await (this.openTx?.done ?? sleep(1));
    }
    return op();
  }

  /**
   * BEGIN IMMEDIATE, waiting for the write lock without blocking the event loop: a busy timeout
   * would block it synchronously, and if the lock holder is a transaction of this same process
   * (another store on the same file) it could never finish. Resolves to the function that marks
   * the transaction finished.
   */
  private async begin(marker: object): Promise<() => void> {
    const deadline = Date.now() + this.busyTimeoutMs;
    for (let delay = 1; ; delay = Math.min(delay * 2, 16)) {
      const finish = await this.run(() => {
        if (!this.tryBeginImmediate()) return null;
        let done = (): void => undefined;
        this.openTx = { marker, done: new Promise<void>((resolve) => (done = resolve)) };
        return done;
      });
      if (finish) return finish;
      if (Date.now() > deadline) {
        throw Object.assign(new Error('database is locked (BEGIN IMMEDIATE timed out)'), {
          code: 'SQLITE_BUSY',
        });
      }
      await sleep(delay);
    }
  }

  private tryBeginImmediate(): boolean {
    // Prepared once: this runs for every transaction, and db.pragma()/exec() prepare each time.
    const timeout = this.prepare(this.db, 'busy:get', () => 'PRAGMA busy_timeout')
      .pluck()
      .get() as number;
    this.prepare(this.db, 'busy:0', () => 'PRAGMA busy_timeout = 0').run();
    try {
      this.prepare(this.db, 'begin', () => 'BEGIN IMMEDIATE').run();
      return true;
    } catch (e) {
      if ((e as { code?: unknown }).code === 'SQLITE_BUSY') return false;
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

  /** Bound parameters of one inserted row, in the order of sql.ts's INSERT_ROW. */
  private insertParams(c: NewCommand): (string | number | null)[] {
    const type = optionalText('type', c.type);
    if (!type) throw new InvalidArgumentError('a command needs a type');
    return [
      type,
      optionalText('bizKey', c.bizKey),
      requirePayloadJson(c.payloadJson, this.maxPayloadBytes),
      requireInt('maxRetry', c.maxRetry, 0),
      c.runAt === undefined || c.runAt === null ? null : requireTime('runAt', c.runAt),
      optionalText('owner', c.owner),
      requireHeadersJson(c.headers),
    ];
  }

  private async fencedBatch(
    name: 'complete' | 'release' | 'releaseRevoked',
    refs: readonly ClaimRef[],
  ): Promise<CommandId[]> {
    if (refs.length === 0) return [];
    const json = refsJson(refs);
    return this.run(() => {
      const done = new Set(this.stmt(name).pluck().all({ refs: json }) as string[]);
      return [...new Set(refs.map((r) => r.id))].filter((id) => done.has(id));
    });
  }

  private async adminTransition(
    name: AdminTransition,
    id: CommandId,
    params: Record<string, string | number | null>,
  ): Promise<E.Either<AdminError, CommandRecord>> {
    const key = toKey(id);
    const sources = JSON.stringify(TRANSITION_SOURCES[name]);
    const statement = name === 'kill' ? 'cancel' : name;
    return this.run(() => {
      // Another instance may change the row between the guarded write and the read that explains a
      // refusal; then the write is simply tried again.
      for (let attempt = 0; attempt < ADMIN_ATTEMPTS; attempt++) {
        let row: CommandRow | undefined;
        try {
          row = this.stmt(statement).get({ ...params, id: key, sources }) as CommandRow | undefined;
        } catch (e) {
          if (name === 'retry' && isUniqueViolation(e)) return E.left(this.idempotencyConflict(key));
          throw e;
        }
        if (row) return E.right(toRecord(row));
        const current = this.stmt('get').get(key) as CommandRow | undefined;
        if (!current) return E.left(new CommandNotFoundError(String(key)));
        const allowed = checkTransition(name, current.status as CommandStatus, String(key));
        if (E.isLeft(allowed)) return E.left(allowed.left);
      }
      throw new Error(`command ${String(key)} kept changing while ${name} was applied to it`);
    });
  }

  private idempotencyConflict(key: bigint): IdempotencyConflictError {
    const row = this.stmt('get').get(key) as CommandRow | undefined;
    const holder = row
      ? (this.stmt('activeHolder').pluck().get(row.type, row.biz_key) as string | undefined)
      : undefined;
    return new IdempotencyConflictError(String(key), holder ?? null);
  }
}

// ── input checks: bad input is refused with a typed error before it reaches SQL ─────────────────────

/** Ids are bound as BigInt so the 64-bit integer column compares exactly. */
function toKey(id: unknown): bigint {
  return BigInt(requireId(id));
}

/** A time to write, as the time columns hold it: epoch milliseconds. */
function requireTime(what: string, value: unknown): number {
  return requireStoredTime(what, value).getTime();
}

/** A time only compared with, in epoch milliseconds. */
function instant(what: string, value: unknown): number {
  return requireInstant(what, value).getTime();
}

function reasonText(reason: unknown): string | null {
  const text = optionalReason(reason);
  return text === null ? null : truncateErrorText(text);
}

/** `[[id, "token"], …]` for the fenced batch statements; ids are validated digits. */
function refsJson(refs: readonly ClaimRef[]): string {
  return `[${refs.map((r) => `[${requireId(r.id)},${JSON.stringify(requireToken(r.token))}]`).join(',')}]`;
}

function isUniqueViolation(e: unknown): boolean {
  return (e as { code?: unknown } | null)?.code === 'SQLITE_CONSTRAINT_UNIQUE';
}
