import * as E from 'fp-ts/lib/Either.js';
import {
  checkTransition,
  CommandNotFoundError,
  FINISHED_STATUSES,
  IdempotencyConflictError,
  InvalidArgumentError,
  isCommandStatus,
  parseCommandId,
  rescueLimitMessage,
  TRANSITION_SOURCES,
  truncateErrorText,
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
  FailureOutcome,
  InsertResult,
  ListPage,
  ListQuery,
  NewCommand,
  PurgeParams,
  ReclaimedCommand,
  ReclaimParams,
  StoreCapabilities,
  StoreStats,
} from '@asynccmd/core';
import type { ClientBase, Pool, PoolClient, QueryResultRow } from 'pg';
import { migrate } from './migrations.js';
import type { TableNames } from './names.js';
import { RAW_TYPES, toDate, toRecord, toTimestamp } from './rows.js';
import type { CommandRow } from './rows.js';
import { buildSql } from './sql.js';
import type { Sql } from './sql.js';
import { runInTransaction } from './transaction.js';
import type { PostgresWakeups } from './wakeups.js';

export interface PostgresCommandStoreParts {
  readonly pool: Pool;
  /** Whether close() ends the pool (false for a pool the application passed in). */
  readonly ownsPool: boolean;
  readonly names: TableNames;
  readonly wakeups: PostgresWakeups;
}

type Queryable = Pick<ClientBase, 'query'> | Pool;

const DEFAULT_LIST_LIMIT = 50;
const MAX_LIST_LIMIT = 1000;
/** An idempotent submit retries while the key's holder keeps finishing under it; rare, so few. */
const IDEMPOTENT_ATTEMPTS = 20;
/** An admin write retries when the row changed between its guarded UPDATE and the re-read. */
const ADMIN_ATTEMPTS = 5;
const UNIQUE_VIOLATION = '23505';

/**
 * The store port on PostgreSQL (see core `CommandStore` for each operation's contract). Submits run
 * on the caller's client inside the caller's transaction; everything else is one statement on the
 * store's pool, in autocommit.
 */
export class PostgresCommandStore implements CommandStore<PoolClient> {
  readonly dialect = 'postgres';
  readonly capabilities: StoreCapabilities = { skipLocked: true, wakeups: true };
  readonly wakeups: PostgresWakeups;
  readonly pool: Pool;
  private readonly sql: Sql;
  private readonly names: TableNames;
  private readonly ownsPool: boolean;
  private closing: Promise<void> | null = null;

  constructor(parts: PostgresCommandStoreParts) {
    this.pool = parts.pool;
    this.ownsPool = parts.ownsPool;
    this.names = parts.names;
    this.wakeups = parts.wakeups;
    this.sql = buildSql(parts.names);
  }

  /** The schema-qualified, quoted table name, e.g. `"public"."async_command"`. */
  get table(): string {
    return this.names.table;
  }

  migrate(): Promise<void> {
    return migrate(this.pool, this.names);
  }

  transaction<T>(fn: (tx: PoolClient) => Promise<T>): Promise<T> {
    return runInTransaction(this.pool, fn);
  }

  async insert(tx: ClientBase, commands: readonly NewCommand[]): Promise<CommandId[]> {
    if (commands.length === 0) return [];
    commands.forEach(checkNewCommand);
    const rows = await this.query<{ id: string }>(tx, this.sql.insert, [
      commands.map((c) => c.type),
      commands.map((c) => c.bizKey ?? null),
      commands.map((c) => c.payloadJson),
      commands.map((c) => c.maxRetry),
      commands.map((c) => (c.runAt ? toTimestamp(c.runAt) : null)),
      commands.map((c) => c.owner ?? null),
      commands.map((c) => JSON.stringify(c.headers ?? {})),
    ]);
    return rows.map((r) => r.id);
  }

  async insertIdempotent(
    tx: ClientBase,
    command: NewCommand & { readonly bizKey: string },
  ): Promise<InsertResult> {
    checkNewCommand(command);
    if (typeof command.bizKey !== 'string') {
      throw new InvalidArgumentError('an idempotent submit needs a bizKey');
    }
    const params = [
      command.type,
      command.bizKey,
      command.payloadJson,
      command.maxRetry,
      command.runAt ? toTimestamp(command.runAt) : null,
      command.owner ?? null,
      JSON.stringify(command.headers ?? {}),
    ];
    for (let attempt = 0; attempt < IDEMPOTENT_ATTEMPTS; attempt++) {
      const [row] = await this.query<{ id: string; duplicate: string }>(
        tx,
        this.sql.insertIdempotent,
        params,
      );
      // Nothing back: the key's holder committed after this statement began, or finished since.
      if (row) return { id: row.id, duplicate: row.duplicate === 't' };
    }
    throw new Error(
      `idempotent submit of (${command.type}, ${command.bizKey}) kept racing with other submits; try again`,
    );
  }

  async claimDue(p: ClaimDueParams): Promise<ClaimedCommand[]> {
    if (p.types.length === 0 || p.limit <= 0) return [];
    checkClaim(p);
    const rows = await this.query<CommandRow>(this.pool, this.sql.claimDue, [
      toTimestamp(p.now),
      p.types,
      Math.floor(p.limit),
      p.token,
      p.leaseMs,
    ]);
    // RETURNING gives no order; the port promises claim order.
    return rows.map(toRecord).sort(byDueThenId) as ClaimedCommand[];
  }

  async claimById(p: ClaimByIdParams): Promise<ClaimedCommand | null> {
    checkClaim(p);
    if (!isCommandId(p.id) || (p.types && p.types.length === 0)) return null;
    const [row] = await this.query<CommandRow>(this.pool, this.sql.claimById, [
      p.id,
      toTimestamp(p.now),
      p.token,
      p.leaseMs,
      p.types ?? null,
    ]);
    return row ? (toRecord(row) as ClaimedCommand) : null;
  }

  async heartbeat(refs: readonly ClaimRef[], leaseMs: number): Promise<ClaimRef[]> {
    checkLease(leaseMs);
    const valid = refs.filter((r) => isCommandId(r.id));
    if (valid.length === 0) return [];
    const rows = await this.query<{ id: string; claim_token: string }>(this.pool, this.sql.heartbeat, [
      valid.map((r) => r.id),
      valid.map((r) => r.token),
      leaseMs,
    ]);
    const held = new Set(rows.map((r) => `${r.id}:${r.claim_token}`));
    return valid.filter((r) => held.has(`${r.id}:${r.token}`));
  }

  complete(refs: readonly ClaimRef[]): Promise<CommandId[]> {
    return this.fencedBatch(this.sql.complete, refs);
  }

  release(refs: readonly ClaimRef[]): Promise<CommandId[]> {
    return this.fencedBatch(this.sql.release, refs);
  }

  async fail(ref: ClaimRef, outcome: FailureOutcome): Promise<boolean> {
    if (!isCommandId(ref.id)) return false;
    if (outcome.status !== 'PENDING' && outcome.status !== 'DEAD') {
      throw new InvalidArgumentError(
        `a failed attempt becomes PENDING or DEAD, not ${String(outcome.status)}`,
      );
    }
    const result = await this.pool.query({
      text: this.sql.fail,
      values: [
        ref.id,
        ref.token,
        outcome.status,
        outcome.retryCount,
        toTimestamp(outcome.nextRunAt),
        truncateErrorText(outcome.lastError),
      ],
      types: RAW_TYPES,
    });
    return result.rowCount === 1;
  }

  async reclaimHung(p: ReclaimParams): Promise<ReclaimedCommand[]> {
    if (p.limit <= 0) return [];
    const rows = await this.query<{ id: string; type: string; status: 'PENDING' | 'DEAD' }>(
      this.pool,
      this.sql.reclaimHung,
      [Math.floor(p.limit), p.maxRescues, rescueLimitMessage(p.maxRescues)],
    );
    return rows
      .map((r) => ({ id: r.id, type: r.type, status: r.status }))
      .sort((a, b) => compareIds(a.id, b.id));
  }

  retry(id: CommandId, now: Date): Promise<E.Either<AdminError, CommandRecord>> {
    return this.admin('retry', id, this.sql.retry, [toTimestamp(now)]);
  }

  requeue(id: CommandId, now: Date): Promise<E.Either<AdminError, CommandRecord>> {
    return this.admin('requeue', id, this.sql.requeue, [toTimestamp(now)]);
  }

  kill(id: CommandId, reason?: string): Promise<E.Either<AdminError, CommandRecord>> {
    return this.admin('kill', id, this.sql.dispose, [reasonText(reason)]);
  }

  cancel(id: CommandId, reason?: string): Promise<E.Either<AdminError, CommandRecord>> {
    return this.admin('cancel', id, this.sql.dispose, [reasonText(reason)]);
  }

  async get(id: CommandId): Promise<CommandRecord | null> {
    if (!isCommandId(id)) return null;
    const [row] = await this.query<CommandRow>(this.pool, this.sql.get, [id]);
    return row ? toRecord(row) : null;
  }

  async getMany(ids: readonly CommandId[]): Promise<CommandRecord[]> {
    const valid = [...new Set(ids.filter(isCommandId))];
    if (valid.length === 0) return [];
    const rows = await this.query<CommandRow>(this.pool, this.sql.getMany, [valid]);
    const byId = new Map(rows.map((r) => [r.id, toRecord(r)]));
    return valid.flatMap((id) => byId.get(id) ?? []);
  }

  async list(q: ListQuery): Promise<ListPage> {
    const limit = q.limit ?? DEFAULT_LIST_LIMIT;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
      throw new InvalidArgumentError(
        `list limit must be an integer from 1 to ${MAX_LIST_LIMIT}, not ${limit}`,
      );
    }
    const statuses =
      q.status === undefined ? null : typeof q.status === 'string' ? [q.status] : [...q.status];
    const unknown = statuses?.find((s) => !isCommandStatus(s));
    if (unknown !== undefined) throw new InvalidArgumentError(`unknown status ${JSON.stringify(unknown)}`);
    const cursor = q.cursor === undefined || q.cursor === null ? null : decodeCursor(q.cursor);
    const rows = await this.query<CommandRow>(this.pool, this.sql.list, [
      statuses,
      q.type ?? null,
      q.bizKey ?? null,
      cursor,
      limit + 1,
    ]);
    const items = rows.slice(0, limit).map(toRecord);
    const last = items[items.length - 1];
    return { items, nextCursor: rows.length > limit && last ? encodeCursor(last.id) : null };
  }

  async stats(now: Date): Promise<StoreStats> {
    const [counts, oldest] = await Promise.all([
      this.query<{ status: CommandStatus; type: string; count: string }>(this.pool, this.sql.counts, []),
      this.query<{ oldest: string | null }>(this.pool, this.sql.oldestDue, [toTimestamp(now)]),
    ]);
    const at = oldest[0]?.oldest ?? null;
    return {
      counts: counts.map((r) => ({ status: r.status, type: r.type, count: Number(r.count) })),
      oldestDueAt: at === null ? null : toDate(at),
    };
  }

  async purge(p: PurgeParams): Promise<number> {
    const statuses = p.statuses ?? ['SUCCESS', 'CANCELLED'];
    const unfinished = statuses.find((s) => !(FINISHED_STATUSES as readonly string[]).includes(s));
    if (unfinished !== undefined) {
      throw new InvalidArgumentError(
        `purge deletes finished commands only, not ${JSON.stringify(unfinished)}`,
      );
    }
    if (!Number.isInteger(p.limit) || p.limit < 0) {
      throw new InvalidArgumentError(`purge limit must be a non-negative integer, not ${p.limit}`);
    }
    if (p.limit === 0 || statuses.length === 0) return 0;
    const result = await this.pool.query({
      text: this.sql.purge,
      values: [statuses, toTimestamp(p.olderThan), p.limit],
      types: RAW_TYPES,
    });
    return result.rowCount ?? 0;
  }

  async now(): Promise<Date> {
    const [row] = await this.query<{ now: string }>(this.pool, this.sql.now, []);
    if (!row) throw new Error('PostgreSQL returned no time');
    return toDate(row.now);
  }

  async ping(): Promise<void> {
    await this.pool.query(this.sql.ping);
  }

  /** Stops wake-ups and, when the store opened the pool, ends it. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.wakeups.close();
      if (this.ownsPool) await this.pool.end();
    })();
    return this.closing;
  }

  private async fencedBatch(text: string, refs: readonly ClaimRef[]): Promise<CommandId[]> {
    const valid = refs.filter((r) => isCommandId(r.id));
    if (valid.length === 0) return [];
    const rows = await this.query<{ id: string }>(this.pool, text, [
      valid.map((r) => r.id),
      valid.map((r) => r.token),
    ]);
    const done = new Set(rows.map((r) => r.id));
    // In the callers' order, each id once.
    return [...new Set(valid.map((r) => r.id))].filter((id) => done.has(id));
  }

  /**
   * One guarded UPDATE (`WHERE id = $1 AND status = ANY(sources)`); when it matches nothing, the row
   * is read to say why: missing, or in a state the transition does not start from.
   */
  private async admin(
    transition: AdminTransition,
    id: CommandId,
    text: string,
    extra: readonly unknown[],
  ): Promise<E.Either<AdminError, CommandRecord>> {
    if (!isCommandId(id)) return E.left(new CommandNotFoundError(String(id)));
    const sources = TRANSITION_SOURCES[transition];
    for (let attempt = 0; attempt < ADMIN_ATTEMPTS; attempt++) {
      let rows: CommandRow[];
      try {
        rows = await this.query<CommandRow>(this.pool, text, [id, sources, ...extra]);
      } catch (err) {
        if (!this.isActiveKeyViolation(err)) throw err;
        const [holder] = await this.query<{ id: string }>(this.pool, this.sql.keyHolder, [id]);
        return E.left(new IdempotencyConflictError(id, holder?.id ?? null));
      }
      const [row] = rows;
      if (row) return E.right(toRecord(row));
      const [current] = await this.query<{ status: CommandStatus }>(this.pool, this.sql.statusOf, [id]);
      if (!current) return E.left(new CommandNotFoundError(id));
      const allowed = checkTransition(transition, current.status, id);
      if (E.isLeft(allowed)) return allowed;
      // It was in a source state after all: it moved between the two statements; try again.
    }
    throw new Error(`command ${id} kept changing state during ${transition}; try again`);
  }

  private isActiveKeyViolation(err: unknown): boolean {
    const e = err as { code?: unknown; constraint?: unknown };
    return e.code === UNIQUE_VIOLATION && e.constraint === this.sql.activeKeyIndex;
  }

  private async query<R extends QueryResultRow>(
    on: Queryable,
    text: string,
    values: readonly unknown[],
  ): Promise<R[]> {
    const result = await on.query<R>({ text, values: [...values], types: RAW_TYPES });
    return result.rows;
  }
}

function isCommandId(id: unknown): id is CommandId {
  return typeof id === 'string' && E.isRight(parseCommandId(id));
}

/** Larger ids are newer; ids are decimal text, so compare by length first. */
function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

function byDueThenId(a: CommandRecord, b: CommandRecord): number {
  return a.nextRunAt.getTime() - b.nextRunAt.getTime() || compareIds(a.id, b.id);
}

function reasonText(reason: string | undefined): string | null {
  return reason === undefined ? null : truncateErrorText(reason);
}

function checkNewCommand(c: NewCommand): void {
  if (typeof c.type !== 'string' || c.type.length === 0) {
    throw new InvalidArgumentError('a command needs a non-empty type');
  }
  if (!Number.isInteger(c.maxRetry) || c.maxRetry < 0) {
    throw new InvalidArgumentError(`maxRetry must be a non-negative integer, not ${c.maxRetry}`);
  }
  if (typeof c.payloadJson !== 'string') {
    throw new InvalidArgumentError('payloadJson must be serialised JSON text (see serialisePayload)');
  }
  if (c.runAt && Number.isNaN(c.runAt.getTime())) throw new InvalidArgumentError('runAt is an invalid Date');
}

function checkClaim(p: { readonly leaseMs: number; readonly now: Date; readonly token: string }): void {
  checkLease(p.leaseMs);
  if (Number.isNaN(p.now.getTime())) throw new InvalidArgumentError('now is an invalid Date');
  if (typeof p.token !== 'string' || p.token.length === 0) {
    throw new InvalidArgumentError('a claim needs a non-empty token');
  }
}

function checkLease(leaseMs: number): void {
  if (!Number.isFinite(leaseMs) || leaseMs < 0) {
    throw new InvalidArgumentError(`leaseMs must be a finite number ≥ 0, not ${leaseMs}`);
  }
}

/** Cursors are opaque to callers; inside, the last id of the page. */
function encodeCursor(id: CommandId): string {
  return Buffer.from(id, 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): string {
  const id = typeof cursor === 'string' ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  if (!isCommandId(id)) throw new InvalidArgumentError(`${JSON.stringify(cursor)} is not a list cursor`);
  return id;
}
