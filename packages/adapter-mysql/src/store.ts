import type * as Port from '@asynccmd/core';
import {
  isSqlExecutor,
  IdempotencyConflictError,
  InvalidArgumentError,
  TransactionRolledBackError,
  optionalInstance,
  refuseNul,
  requireInstant as coreRequireInstant,
  requireId,
  requireInt,
  requireTypes,
} from '@asynccmd/core';
import {
  claimWithinLimits,
  guardedTransition,
  inCallersOrder,
  insertIdempotently,
  listPage,
  outcomeCountsFromRows,
  statsRowsFromRows,
  runThroughExecutor,
  StoreInput,
  typePauseStore,
} from '@asynccmd/core/store-kit';
import type { CheckedCommand, GuardedAttempt, OutcomeCountRow } from '@asynccmd/core/store-kit';
import type * as E from 'fp-ts/lib/Either.js';
import type { Connection, Pool, PoolConnection, ResultSetHeader } from 'mysql2/promise';
import type { ClaimPools, ClaimRound, ClaimStrategy } from './claim-strategies.js';
import { CLAIM_STRATEGIES, strategyForServer } from './claim-strategies.js';
import type { Queryable } from './connection.js';
import {
  inTransaction,
  isConnectionLost,
  isDeadlock,
  isDuplicateKey,
  isLockConflict,
  LostRaceError,
  retryConnectionLoss,
  retryLockConflicts,
  rollbackQuietly,
  select,
  write,
} from './connection.js';
import {
  insertIdempotentThroughExecutor,
  insertThroughExecutor,
  replaceIdempotently,
  statementsThrough,
} from './executor-insert.js';
import type { RunStatement } from './executor-insert.js';
import { KEY_LOCK_SLOTS, migrationScript, runMigrations } from './migrations.js';
import { MysqlScheduleStore } from './schedules.js';
import { claimLimitedDue, mysqlTypeLimitStore, typeLimitSql, withinTypeLimit } from './type-limits.js';
import type { TypeLimitSql } from './type-limits.js';
import { MysqlWakeups } from './wakeups.js';
import type { CommandRow } from './rows.js';
import { fromUtcText, toRecord, toUtcText } from './rows.js';
import type { MysqlSql } from './sql.js';
import { mysqlSql } from './sql.js';

export interface MysqlStoreParts {
  readonly pool: Pool;
  /** Whether close() ends the pool (false for a pool the caller handed in). */
  readonly ownsPool: boolean;
  /** The store's READ COMMITTED claim pool (see claim-strategies `ClaimPools`), ended by close(); null on a caller's pool. */
  readonly claimPool: Pool | null;
  readonly table: string;
  /** A fixed strategy, or 'auto': chosen from the server version on first need (migrate or claim). */
  readonly strategy: ClaimStrategy | 'auto';
  /** Largest payload accepted, in UTF-8 bytes of its JSON; default core DEFAULT_MAX_PAYLOAD_BYTES. */
  readonly maxPayloadBytes?: number;
}

/** Rows per multi-row INSERT, and the payload bytes one statement may carry (max_allowed_packet is 16 MiB by default). */
const INSERT_CHUNK_ROWS = 1000;
const INSERT_CHUNK_BYTES = 4 * 1024 * 1024;
const SERVER_STATUS_IN_TRANS = 0x0001;
/** Column widths (in characters) of the table; longer text is refused rather than cut. */
const WIDTHS = { type: 128, bizKey: 255, owner: 128, token: 128 } as const;

/**
 * The store port on MySQL 8 / MariaDB 10.6+ (and older servers through the legacy claim). `Tx` is a
 * mysql2/promise connection: submits run on the caller's connection and commit or roll back with
 * the caller's transaction; everything else runs on the store's pool.
 */
export class MysqlCommandStore implements Port.CommandStore<Connection> {
  readonly dialect = 'mysql';
  readonly table: string;
  private resolved: ClaimStrategy | null;
  private detecting: Promise<ClaimStrategy> | null = null;
  private readonly pool: Pool;
  private readonly ownsPool: boolean;
  private readonly claimPools: ClaimPools;
  private readonly sql: MysqlSql;
  private readonly input: StoreInput;
  private closed = false;
  readonly schedules: MysqlScheduleStore;
  readonly typeLimits: Port.TypeLimitStore;
  readonly typePauses: Port.TypePauseStore = typePauseStore({
    insert: async (type, reason) => {
      try {
        await write(this.pool, this.sql.typePause, [type, reason]);
        return true;
      } catch (e) {
        if (isDuplicateKey(e)) return false;
        throw e;
      }
    },
    remove: async (type) => (await write(this.pool, this.sql.typeResume, [type])).affectedRows === 1,
    read: async () =>
      (
        await select<{ type: string; paused_at: string; reason: string | null }>(
          this.pool,
          this.sql.typePauseList,
        )
      ).map((r) => ({ type: r.type, pausedAt: fromUtcText(r.paused_at), reason: r.reason })),
  });
  private readonly limitSql: TypeLimitSql;
  /** Other processes' submits, seen by a polled probe (wakeups.ts). */
  readonly wakeups: MysqlWakeups;

  constructor(parts: MysqlStoreParts) {
    this.wakeups = new MysqlWakeups(parts.pool, parts.table);
    this.pool = parts.pool;
    this.ownsPool = parts.ownsPool;
    this.claimPools = { pool: parts.pool, claimPool: parts.claimPool };
    this.table = parts.table;
    this.resolved = parts.strategy === 'auto' ? null : parts.strategy;
    this.sql = mysqlSql(parts.table);
    this.input = new StoreInput({ maxPayloadBytes: parts.maxPayloadBytes, textWidths: WIDTHS });
    this.limitSql = typeLimitSql(parts.table);
    this.typeLimits = mysqlTypeLimitStore(parts.pool, this.limitSql);
    this.schedules = new MysqlScheduleStore(parts.pool, parts.table, (c) =>
      insertParams(this.input.command(c), false),
    );
  }

  /** With the 'auto' strategy, skipLocked is known once the server was asked (migrate or first claim). */
  get capabilities(): Port.StoreCapabilities<Connection> {
    return {
      skipLocked: this.resolved?.skipLocked ?? false,
      wakeups: true,
      revocations: false,
      sqlExecutor: true,
      commitRiding: null,
    };
  }

  /** The claim strategy in use, asking the server its version the first time under 'auto'. */
  async claimStrategy(): Promise<ClaimStrategy> {
    if (this.resolved) return this.resolved;
    this.detecting ??= select<{ version: string }>(this.pool, 'SELECT VERSION() AS version').then(
      ([row]) => (this.resolved = CLAIM_STRATEGIES[strategyForServer(String(row?.version ?? ''))]),
      (e: unknown) => {
        this.detecting = null; // the server was unreachable: ask again next time
        throw e;
      },
    );
    return this.detecting;
  }

  async migrate(): Promise<void> {
    await this.claimStrategy();
    // mysql2's query() escapes bound values with backslashes; under NO_BACKSLASH_ESCAPES the server
    // would read them differently, so such a server is refused up front rather than mis-parsed.
    const [mode] = await select<{ mode: string }>(this.pool, 'SELECT @@SESSION.sql_mode AS mode');
    if (/NO_BACKSLASH_ESCAPES/i.test(mode?.mode ?? '')) {
      throw new InvalidArgumentError(
        'the MySQL store needs sql_mode without NO_BACKSLASH_ESCAPES (mysql2 escapes values with backslashes)',
      );
    }
    await runMigrations(this.pool, this.table);
  }

  async migrationScript(options: Port.MigrationScriptOptions = {}): Promise<Port.MigrationScript> {
    return migrationScript(this.pool, this.table, options.all === true);
  }

  async transaction<T>(fn: (tx: Connection) => Promise<T>): Promise<T> {
    // The server's default isolation: this is the caller's business transaction, not a claim.
    return inTransaction(this.pool, false, fn);
  }

  async insert(
    tx: Connection | Port.SqlExecutor,
    commands: readonly Port.NewCommand[],
  ): Promise<Port.CommandId[]> {
    const checked = this.input.commands(commands);
    const rows = checked.map((c) => insertParams(c, false));
    if (rows.length === 0) return [];
    const slots = keySlots(checked);
    if (isSqlExecutor(tx)) {
      if (slots.length > 0)
        await runThroughExecutor(tx, this.sql.lockKeySlots(slots.length), slots, 'question-mark');
      return insertThroughExecutor(tx, this.sql.insertMany(1), rows);
    }
    const chunks = chunkRows(rows);
    if (chunks.length === 1 && slots.length === 0) return this.insertChunk(tx, chunks[0] ?? []);
    return this.inOneTransaction(tx, async () => {
      await this.lockKeySlots(tx, slots);
      const ids: Port.CommandId[] = [];
      for (const chunk of chunks) ids.push(...(await this.insertChunk(tx, chunk)));
      return ids;
    });
  }

  /**
   * Runs `fn`'s statements so that they commit together: inside the caller's transaction they do;
   * on a connection in autocommit they get a transaction of their own.
   */
  private async inOneTransaction<T>(tx: Connection, fn: () => Promise<T>): Promise<T> {
    const probe = await write(tx, this.sql.probeTransaction);
    const own = (probe.serverStatus & SERVER_STATUS_IN_TRANS) === 0;
    if (own) await tx.query('START TRANSACTION');
    try {
      const result = await fn();
      if (own) await tx.query('COMMIT');
      return result;
    } catch (e) {
      if (own) await rollbackQuietly(tx);
      throw e;
    }
  }

  /**
   * Locks the key slots of keyed commands to the end of the transaction, in slot order (two
   * submitters never wait on each other crosswise): a later submit of the same key waits for this
   * transaction to commit before its insert draws an id, so a key's ids follow the commit order.
   */
  private async lockKeySlots(tx: Queryable, slots: readonly number[]): Promise<void> {
    if (slots.length > 0) await select(tx, this.sql.lockKeySlots(slots.length), slots);
  }

  async insertIdempotent(
    tx: Connection | Port.SqlExecutor,
    command: Port.NewCommand & { readonly bizKey: string },
    options?: Port.IdempotentInsertOptions,
  ): Promise<Port.InsertResult> {
    const checked = this.input.idempotentCommand(command);
    const onPending = this.input.onPending(options);
    try {
      return await this.insertIdempotentChecked(tx, checked, onPending);
    } catch (e) {
      // A submit finds the key's holder through its active_key entry, then the row; a holder's
      // outcome write locks the row, then that entry: when both meet, InnoDB rolls one of the
      // transactions back whole. The caller's business writes went with it.
      // (Some ORMs wrap the driver's error.)
      if (isDeadlock(e) || isDeadlock((e as { cause?: unknown } | null)?.cause)) {
        throw new TransactionRolledBackError(
          'the transaction was rolled back: the database broke a deadlock between this idempotent submit and the command holding its key as it finished; run the transaction again',
        );
      }
      throw e;
    }
  }

  private async insertIdempotentChecked(
    tx: Connection | Port.SqlExecutor,
    checked: CheckedCommand & { readonly bizKey: string },
    onPending: Port.OnPending,
  ): Promise<Port.InsertResult> {
    const params = insertParams(checked, true);
    const slots = keySlots([checked]);
    if (slots.length > 0) {
      if (isSqlExecutor(tx)) {
        await runThroughExecutor(tx, this.sql.lockKeySlots(slots.length), slots, 'question-mark');
      } else {
        return this.inOneTransaction(tx, async () => {
          await this.lockKeySlots(tx, slots);
          return this.insertIdempotentRow(tx, checked, params, onPending);
        });
      }
    }
    return this.insertIdempotentRow(tx, checked, params, onPending);
  }

  private insertIdempotentRow(
    tx: Connection | Port.SqlExecutor,
    checked: CheckedCommand & { readonly bizKey: string },
    params: InsertParams,
    onPending: Port.OnPending,
  ): Promise<Port.InsertResult> {
    const key = { type: checked.type, bizKey: checked.bizKey };
    if (onPending !== 'keep') {
      const withRunAt = onPending === 'replace';
      const contents = replacingParams(checked, withRunAt);
      const run: RunStatement = isSqlExecutor(tx)
        ? statementsThrough(tx)
        : (text, values) => select<Record<string, unknown>>(tx, text, values);
      return insertIdempotently(checked, async () => {
        const result = await replaceIdempotently(run, this.sql, key, withRunAt, contents, params);
        if (result !== null && !result.duplicate && !isSqlExecutor(tx)) this.wakeups.insertedHere(result.id);
        return result;
      });
    }
    // The holder may finish between the refused insert and the look-up: then insert again.
    return insertIdempotently(checked, async () => {
      if (isSqlExecutor(tx)) {
        return insertIdempotentThroughExecutor(
          tx,
          this.sql.insertMany(1),
          this.sql.activeHolder,
          params,
          key,
        );
      }
      try {
        const [id] = await this.insertChunk(tx, [params]);
        return { id: id as Port.CommandId, duplicate: false, replaced: false };
      } catch (e) {
        if (!isDuplicateKey(e)) throw e;
      }
      // A duplicate-key error rolls back the statement only; the caller's transaction goes on. The
      // look-up stays on the caller's connection: a second connection from the store's pool could
      // wait forever while every pooled connection sits in a caller's transaction doing the same.
      const [holder] = await select<{ id: string }>(tx, this.sql.activeHolder, [
        checked.type,
        checked.bizKey,
      ]);
      return holder ? { id: String(holder.id), duplicate: true, replaced: false } : null;
    });
  }

  async claimDue(params: Port.ClaimDueParams): Promise<Port.ClaimedCommand[]> {
    const limit = requireInt('limit', params.limit, 0);
    const types = requireTypes(params.types);
    const round = {
      token: requireToken(params.token),
      instance: optionalInstance(params.instance),
      leaseMicros: requireInt('leaseMs', params.leaseMs, 1) * 1000,
      now: requireInstant('now', params.now),
      types,
      limit,
    };
    if (limit === 0 || types.length === 0) return [];
    const rows = await this.claimRound(round, params.limitedTypes);
    // A full claim tells the wake-up probe that this claimer is draining a backlog (wakeups.ts).
    this.wakeups.claimed(types, limit, rows.length);
    return rows;
  }

  /** One claim round, its lost races and lost connections settled (see below). */
  private async claimRound(
    round: ClaimRound,
    limitedTypes: readonly string[] | undefined,
  ): Promise<Port.ClaimedCommand[]> {
    const { types, limit } = round;
    try {
      const strategy = await this.claimStrategy();
      const claim = (r: ClaimRound): Promise<Port.ClaimedCommand[]> =>
        retryLockConflicts(() => strategy.claim(this.claimPools, this.sql, r)).then(
          (rows) => rows.map(toRecord) as Port.ClaimedCommand[],
        );
      if (limitedTypes === undefined || limitedTypes.length === 0) return await claim(round);
      return await claimWithinLimits(types, limitedTypes, limit, {
        claimLimited: (type, max) =>
          retryLockConflicts(() =>
            withinTypeLimit(this.pool, this.limitSql, type, max, (conn, free) =>
              claimLimitedDue(conn, this.sql, strategy, { ...round, type, free }),
            ),
          ).then((rows) => rows.map(toRecord) as Port.ClaimedCommand[]),
        // The round's token reads back the limited types' rows too: only the others' here.
        claimOthers: (others, max) =>
          claim({ ...round, types: others, limit: max }).then((rows) =>
            rows.filter((r) => others.includes(r.type)),
          ),
      });
    } catch (e) {
      // Races lost on every try (on Galera: other nodes claimed the same rows each time) are
      // contention, not an outage: this round claimed nothing, the next finds what is left.
      if (isLockConflict(e)) return this.claimedBy(round.token).catch(() => []);
      // The connection died during the claim: it may have committed before it did. The token is
      // fresh and ours alone, so a read by it tells; rows it finds are claimed and must not wait for
      // a reclaim.
      if (!isConnectionLost(e)) throw e;
      const claimed = await this.claimedBy(round.token).catch(() => []);
      if (claimed.length === 0) throw e;
      return claimed;
    }
  }

  async claimById(params: Port.ClaimByIdParams): Promise<Port.ClaimedCommand | null> {
    const id = requireId(params.id);
    const token = requireToken(params.token);
    const instance = optionalInstance(params.instance);
    const lease = requireInt('leaseMs', params.leaseMs, 1) * 1000;
    const now = requireInstant('now', params.now);
    const types = params.types === undefined ? undefined : requireTypes(params.types);
    if (types !== undefined && types.length === 0) return null;
    const readBack = async (): Promise<Port.ClaimedCommand | null> => {
      const [row] = await select<CommandRow>(this.pool, this.sql.claimedRow, [id, token]);
      return row ? (toRecord(row) as Port.ClaimedCommand) : null;
    };
    const mark = (db: Queryable, withoutKey: 0 | 1) =>
      types === undefined
        ? write(db, this.sql.claimById, [token, instance, lease, id, now, withoutKey])
        : write(db, this.sql.claimByIdOfTypes, [token, instance, lease, id, now, types, withoutKey]);
    /** Marks the command claimed on `db`; false when it is not claimable. */
    const claimOn = async (db: Queryable): Promise<boolean> => {
      if ((await mark(db, 1)).affectedRows > 0) return true;
      // Not claimable as a command without a key: perhaps one with a key, first of it.
      const first = await select(db, this.sql.firstOfKeyById, [id]);
      return first.length > 0 && (await mark(db, 0)).affectedRows > 0;
    };
    const limited = params.limitedTypes === undefined ? [] : requireTypes(params.limitedTypes);
    try {
      const [command] =
        limited.length === 0 ? [] : await select<{ type: string }>(this.pool, this.limitSql.typeOf, [id]);
      if (command !== undefined && limited.includes(command.type)) {
        const [claimed] = await retryLockConflicts(() =>
          withinTypeLimit(this.pool, this.limitSql, command.type, 1, async (conn) =>
            (await claimOn(conn)) ? [true] : [],
          ),
        );
        if (claimed === undefined) return null;
      } else if (!(await retryLockConflicts(() => claimOn(this.pool)))) {
        return null;
      }
    } catch (e) {
      // As in claimDue: the write may have landed before the connection died; the token tells.
      if (!isConnectionLost(e)) throw e;
      const claimed = await readBack().catch(() => null);
      if (claimed === null) throw e;
      return claimed;
    }
    return retryConnectionLoss(readBack);
  }

  async heartbeat(refs: readonly Port.ClaimRef[], leaseMs: number): Promise<Port.ClaimRef[]> {
    const lease = this.input.leaseMs(leaseMs) * 1000;
    const { count, tokens, values } = refValues(this.input.refs(refs));
    if (count === 0) return [];
    // Extending a lease twice is harmless, so a lost connection just means: do it again.
    const updated = await retryConnectionLoss(() =>
      retryLockConflicts(() => write(this.pool, this.sql.heartbeat(tokens), [lease, ...values])),
    );
    if (updated.affectedRows === count) return [...refs];
    const held = await select<{ id: string; claim_token: string }>(
      this.pool,
      this.sql.heldRefs(tokens),
      values,
    );
    const live = new Set(held.map((r) => `${r.id} ${r.claim_token}`));
    return refs.filter((r) => live.has(`${r.id} ${r.token}`));
  }

  async complete(attempts: readonly Port.CompletedAttempt[]): Promise<Port.CommandId[]> {
    const checkedRefs = this.input.completedAttempts(attempts);
    const { count, tokens, values } = refValues(checkedRefs);
    if (count === 0) return [];
    const results = checkedRefs.filter((a) => a.resultJson !== undefined);
    // Only attempts that left a result take the statement that writes them: the commonest write
    // stays as it was.
    const [sql, bound] =
      results.length === 0
        ? [this.sql.complete(tokens), values]
        : [
            this.sql.completeWithResults(tokens, results.length),
            [...results.flatMap((a) => [a.id, a.token, a.resultJson]), ...values],
          ];
    // Completing again after a lost connection is harmless: the read below reports the refs whose
    // command is SUCCESS under their own claim, finished by the first try or the second (which,
    // finding the row SUCCESS, leaves the first try's result as it is).
    const updated = await retryConnectionLoss(() => retryLockConflicts(() => write(this.pool, sql, bound)));
    const ids = unique(checkedRefs.map((r) => r.id));
    if (updated.affectedRows === count && ids.length === count) return ids;
    const done = await select<{ id: string }>(this.pool, this.sql.completedBy(tokens), values);
    return inCallersOrder(
      ids,
      done.map((r) => String(r.id)),
    );
  }

  async fail(attempts: readonly Port.FailedAttempt[]): Promise<Port.CommandId[]> {
    const checked = this.input
      .failedAttempts(attempts)
      .map((a) => ({ ...a, nextRunAt: toUtcText(a.nextRunAt) }));
    const [one] = checked;
    if (one === undefined) return [];
    if (checked.length === 1) {
      const values = [
        one.status,
        one.lastError,
        one.status,
        one.retryCount,
        one.nextRunAt,
        one.lastError,
        one.status,
        one.id,
        one.token,
      ];
      const updated = await retryLockConflicts(() => write(this.pool, this.sql.failOne, values));
      return updated.affectedRows === 1 ? [one.id] : this.failedBefore(checked);
    }
    // Many: lock the rows whose claim still holds, then write each one's outcome in one statement.
    const { tokens, values } = refValues(checked);
    const written = await retryLockConflicts(() =>
      inTransaction(this.pool, true, async (conn) => {
        const held = new Set(
          (await select<{ id: string; claim_token: string }>(conn, this.sql.lockHeld(tokens), values)).map(
            (r) => `${String(r.id)} ${r.claim_token}`,
          ),
        );
        const rows = checked.filter((c) => held.has(`${c.id} ${c.token}`));
        if (rows.length === 0) return new Set<string>();
        const pairs = (value: (c: (typeof rows)[number]) => unknown): unknown[] =>
          rows.flatMap((c) => [c.id, value(c)]);
        const failed = await write(conn, this.sql.failHeld(rows.length), [
          ...pairs((c) => c.status),
          ...pairs((c) => c.lastError),
          ...pairs((c) => c.status),
          ...pairs((c) => c.retryCount),
          ...pairs((c) => c.nextRunAt),
          ...pairs((c) => c.lastError),
          ...pairs((c) => c.status),
          rows.map((c) => c.id),
        ]);
        expectAll(failed, rows.length, 'fail');
        return new Set(rows.map((c) => c.id));
      }),
    );
    const ids = unique(checked.map((c) => c.id));
    if (written.size < ids.length) {
      for (const id of await this.failedBefore(checked.filter((c) => !written.has(c.id)))) written.add(id);
    }
    return inCallersOrder(ids, written);
  }

  /** Of these attempts, those an earlier try of the same fail already wrote (its reply lost): recorded, not fenced. */
  private async failedBefore(
    attempts: readonly { id: string; token: string; status: string; retryCount: number }[],
  ): Promise<Port.CommandId[]> {
    const found = await select<{ id: string }>(this.pool, this.sql.failedBefore(attempts.length), [
      attempts.map((a) => a.id),
      ...attempts.flatMap((a) => [a.id, a.token, a.status, a.retryCount]),
    ]);
    return found.map((r) => String(r.id));
  }

  async release(refs: readonly Port.ClaimRef[]): Promise<Port.CommandId[]> {
    // PENDING is not final (the row may be claimed again at once), so lock, then move exactly those.
    return this.lockThenMove(refs, this.sql.lockHeld, this.sql.release);
  }

  async releaseRevoked(refs: readonly Port.ClaimRef[]): Promise<Port.CommandId[]> {
    return this.lockThenMove(refs, this.sql.lockHeldBack, this.sql.releaseRevoked);
  }

  /** In one transaction: lock the rows `lock` finds for these refs, then `move` exactly those (bound: their ids). */
  private async lockThenMove(
    refs: readonly Port.ClaimRef[],
    lock: (tokens: number) => string,
    move: string,
  ): Promise<Port.CommandId[]> {
    const checked = this.input.refs(refs);
    const { count, tokens, values } = refValues(checked);
    if (count === 0) return [];
    return retryLockConflicts(() =>
      inTransaction(this.pool, true, async (conn) => {
        const held = (await select<{ id: string }>(conn, lock(tokens), values)).map((r) => String(r.id));
        if (held.length > 0) expectAll(await write(conn, move, [held]), held.length, 'release');
        return inCallersOrder(
          checked.map((r) => r.id),
          held,
        );
      }),
    );
  }

  async reclaimHung(params: Port.ReclaimParams): Promise<Port.ReclaimedCommand[]> {
    const reclaim = this.input.reclaim(params);
    if (reclaim === null) return [];
    const { limit, maxRescues, deadError: dead } = reclaim;
    const strategy = await this.claimStrategy();
    if ((await retryConnectionLoss(() => select(this.pool, this.sql.anyHung))).length === 0) return [];
    return retryLockConflicts(() =>
      inTransaction(this.pool, true, async (conn) => {
        const hung = await select<{
          id: string;
          type: string;
          rescue_count: number;
          rescue_count_at_retry: number;
        }>(conn, `${this.sql.hungCandidates} ${strategy.hungLock}`, [limit]);
        if (hung.length === 0) return [];
        const ids = hung.map((h) => String(h.id));
        const limits = [maxRescues, maxRescues, dead];
        const moved = await write(conn, this.sql.reclaim, [...limits, ...limits, maxRescues, ids]);
        // The rows are locked until commit, so the guarded write moved every one of them (or, on
        // Galera, another node's write took them meanwhile, and the whole reclaim is tried again).
        expectAll(moved, ids.length, 'reclaim');
        return hung.map((h) => ({
          id: String(h.id),
          type: h.type,
          status:
            Number(h.rescue_count) + 1 - Number(h.rescue_count_at_retry) > maxRescues
              ? ('DEAD' as const)
              : ('PENDING' as const),
        }));
      }),
    );
  }

  async retry(id: Port.CommandId, now: Date): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('retry', id, [toUtcText(this.input.adminNow(now))]);
  }

  async requeue(id: Port.CommandId, now: Date): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('requeue', id, [toUtcText(this.input.adminNow(now))]);
  }

  async kill(id: Port.CommandId, reason?: string): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    const why = this.input.reason(reason);
    return this.adminTransition('kill', id, [why, why]);
  }

  async cancel(id: Port.CommandId, reason?: string): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('cancel', id, [this.input.reason(reason)]);
  }

  async get(id: Port.CommandId): Promise<Port.CommandRecord | null> {
    const key = this.input.id(id);
    const [row] = await retryConnectionLoss(() => select<CommandRow>(this.pool, this.sql.get, [key]));
    return row ? toRecord(row) : null;
  }

  async getMany(ids: readonly Port.CommandId[]): Promise<Port.CommandRecord[]> {
    const keys = this.input.ids(ids);
    if (keys.length === 0) return [];
    const rows = await retryConnectionLoss(() => select<CommandRow>(this.pool, this.sql.getMany, [keys]));
    return rows.map(toRecord);
  }

  async list(query: Port.ListQuery): Promise<Port.ListPage> {
    const { limit, fetch, statuses, type, bizKey, after } = this.input.list(query);
    const filters: ('status' | 'type' | 'bizKey' | 'before')[] = [];
    const values: unknown[] = [];
    const add = (f: (typeof filters)[number], v: unknown): void => {
      filters.push(f);
      values.push(v);
    };
    if (statuses !== null) add('status', statuses);
    if (type !== null) add('type', type);
    if (bizKey !== null) add('bizKey', bizKey);
    if (after !== null) {
      const at = toUtcText(after.createdAt);
      filters.push('before');
      values.push(at, at, after.id);
    }
    if (statuses?.length === 0) return { items: [], nextCursor: null };
    const rows = await retryConnectionLoss(() =>
      select<CommandRow>(this.pool, this.sql.list(filters), [...values, fetch]),
    );
    return listPage(rows, limit, toRecord);
  }

  async stats(now: Date): Promise<Port.StoreStats> {
    const at = toUtcText(this.input.instant('now', now));
    return retryConnectionLoss(async () => {
      const counts = await select<{ status: Port.CommandStatus; type: string; count: string | number }>(
        this.pool,
        this.sql.counts,
      );
      const [oldest] = await select<{ oldest: string | null }>(this.pool, this.sql.oldestDue, [at]);
      return {
        counts: statsRowsFromRows(counts),
        oldestDueAt: oldest?.oldest ? fromUtcText(oldest.oldest) : null,
      };
    });
  }

  async healthProbe(params: Port.HealthProbeParams): Promise<Port.HealthProbe> {
    const { now, deadLetterLimit } = this.input.healthProbe(params);
    const at = toUtcText(this.input.instant('now', now));
    const [row] = await retryConnectionLoss(() =>
      select<{ dead_letters: string | number; oldest: string | null }>(this.pool, this.sql.healthProbe, [
        deadLetterLimit,
        at,
      ]),
    );
    return {
      deadLetters: Number(row?.dead_letters ?? 0),
      oldestDueAt: row?.oldest ? fromUtcText(row.oldest) : null,
    };
  }

  async outcomeCounts(params: Port.OutcomeCountParams): Promise<Port.OutcomeCount[]> {
    const { from, to, latencyBoundsMs } = this.input.outcomeCounts(params);
    const rows = await retryConnectionLoss(() =>
      select<OutcomeCountRow>(this.pool, this.sql.outcomeCounts(latencyBoundsMs.length), [
        ...latencyBoundsMs.map((ms) => ms * 1000),
        from,
        to,
      ]),
    );
    return outcomeCountsFromRows(rows);
  }

  async purge(params: Port.PurgeParams): Promise<number> {
    const purge = this.input.purge(params);
    if (purge === null) return 0;
    const { limit } = purge;
    const olderThan = toUtcText(purge.olderThan);
    let deleted = 0;
    for (const status of purge.statuses) {
      if (deleted >= limit) break;
      const batch = limit - deleted;
      const result = await retryLockConflicts(() =>
        write(this.pool, this.sql.purge, [status, olderThan, batch]),
      );
      deleted += result.affectedRows;
    }
    return deleted;
  }

  async now(): Promise<Date> {
    const [row] = await retryConnectionLoss(() => select<{ now: string }>(this.pool, this.sql.now));
    if (!row) throw new Error('the database returned no time');
    return fromUtcText(row.now);
  }

  async ping(): Promise<void> {
    await retryConnectionLoss(() => select(this.pool, this.sql.ping));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.wakeups.close();
    await Promise.all([this.ownsPool ? this.pool.end() : undefined, this.claimPools.claimPool?.end()]);
  }

  // ── internals ──────────────────────────────────────────────────────────────────────────────────

  private async claimedBy(token: string): Promise<Port.ClaimedCommand[]> {
    const rows = await select<CommandRow>(this.pool, this.sql.claimedBy, [token]);
    return rows.map(toRecord) as Port.ClaimedCommand[];
  }

  /** One multi-row INSERT; its ids are consecutive (InnoDB, simple insert), stepping by auto_increment_increment. */
  private async insertChunk(tx: Queryable, rows: readonly InsertParams[]): Promise<Port.CommandId[]> {
    const header: ResultSetHeader = await write(tx, this.sql.insertMany(rows.length), rows.flat());
    let first: bigint;
    if (typeof header.insertId === 'number' && !Number.isSafeInteger(header.insertId)) {
      const [last] = await select<{ id: string }>(tx, this.sql.lastInsertId);
      first = BigInt(String(last?.id));
    } else {
      first = BigInt(String(header.insertId));
    }
    const step = rows.length === 1 ? 1n : await this.step(tx);
    const ids = rows.map((_, i) => String(first + BigInt(i) * step));
    this.wakeups.insertedHere(ids[ids.length - 1] ?? null);
    return ids;
  }

  /** auto_increment_increment is a session variable (Galera sets it per node): asked on the connection that inserted. */
  private async step(tx: Queryable): Promise<bigint> {
    const [row] = await select<{ step: string | number }>(tx, this.sql.autoIncrementStep);
    return BigInt(String(row?.step ?? 1));
  }

  /**
   * One guarded write in a short transaction, then the row as it now is: a refusal is explained
   * from it (core guardedTransition).
   */
  private async adminTransition(
    name: Port.AdminTransition,
    id: Port.CommandId,
    leading: readonly unknown[],
  ): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    const key = this.input.id(id);
    return guardedTransition(name, key, () =>
      retryLockConflicts(() =>
        inTransaction(this.pool, true, async (conn): Promise<GuardedAttempt> => {
          let updated: ResultSetHeader;
          try {
            updated = await write(conn, this.sql[name], [...leading, key]);
          } catch (e) {
            if (name === 'retry' && isDuplicateKey(e))
              return { refused: await this.idempotencyConflict(conn, key) };
            throw e;
          }
          const [row] = await select<CommandRow>(conn, this.sql.get, [key]);
          if (!row) return { unmatched: null };
          return updated.affectedRows === 1 ? { applied: toRecord(row) } : { unmatched: row.status };
        }),
      ),
    );
  }

  private async idempotencyConflict(conn: PoolConnection, id: string): Promise<IdempotencyConflictError> {
    const [row] = await select<CommandRow>(conn, this.sql.get, [id]);
    const [holder] = row
      ? await select<{ id: string }>(conn, this.sql.activeHolder, [row.type, row.biz_key])
      : [];
    return new IdempotencyConflictError(id, holder ? String(holder.id) : null);
  }
}

type InsertParams = readonly [
  string,
  string | null,
  string,
  number,
  string | null,
  string | null,
  number,
  string,
  number,
  string | null,
];

function chunkRows(rows: readonly InsertParams[]): InsertParams[][] {
  const chunks: InsertParams[][] = [];
  let current: InsertParams[] = [];
  let bytes = 0;
  for (const row of rows) {
    const size = Buffer.byteLength(row[2], 'utf8') + 512;
    if (current.length > 0 && (current.length >= INSERT_CHUNK_ROWS || bytes + size > INSERT_CHUNK_BYTES)) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(row);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/** The key-lock slots of the commands' ordering keys, each once, in ascending order. */
function keySlots(commands: readonly CheckedCommand[]): number[] {
  const slots = new Set<number>();
  for (const c of commands) if (c.orderingKey !== null) slots.add(keySlot(c.orderingKey));
  return [...slots].sort((a, b) => a - b);
}

/** FNV-1a of the key's UTF-8 bytes, onto the slots of `<table>_key_locks`. */
function keySlot(key: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(key, 'utf8')) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash % KEY_LOCK_SLOTS;
}

// ── encoding ─────────────────────────────────────────────────────────────────────────────────────

/** Bound parameters of one inserted row, in the order of sql.ts's INSERT_ROW. */
function insertParams(c: CheckedCommand, idempotent: boolean): InsertParams {
  const runAt = c.runAt === null ? null : toUtcText(c.runAt);
  return [
    c.type,
    c.bizKey,
    c.payloadJson,
    c.maxRetry,
    runAt,
    c.owner,
    idempotent ? 1 : 0,
    c.headersJson,
    c.priority,
    c.orderingKey,
  ];
}

/** A replacing submit's contents, as replaceHolder and insertReplacingPending bind them. */
function replacingParams(c: CheckedCommand, withRunAt: boolean): unknown[] {
  const contents: unknown[] = [c.payloadJson, c.maxRetry, c.headersJson, c.priority];
  if (withRunAt) contents.push(c.runAt === null ? null : toUtcText(c.runAt));
  return contents;
}

/** A point in time only compared with (never stored), clamped into DATETIME's range. */
function requireInstant(what: string, value: unknown): string {
  return toUtcText(coreRequireInstant(what, value));
}

function requireText(what: string, value: unknown, maxChars: number): string {
  if (typeof value !== 'string') throw new InvalidArgumentError(`${what} must be a string`);
  refuseNul(what, value);
  // Column widths count characters (code points), not UTF-16 units.
  if ([...value].length > maxChars) {
    throw new InvalidArgumentError(`${what} is longer than ${maxChars} characters`);
  }
  return value;
}

function requireToken(token: unknown): string {
  const text = requireText('a claim token', token, WIDTHS.token);
  if (text === '') throw new InvalidArgumentError('a claim token must be a non-empty string');
  return text;
}

/**
 * The bound values of sql.ts `refs(tokens)` for these refs, each distinct (id, token) once: every
 * id as one list, then each distinct token, followed (with more than one token) by its refs' ids.
 * `count` is the number of distinct refs, what a write that found them all changed.
 */
function refValues(refs: readonly Port.ClaimRef[]): { count: number; tokens: number; values: unknown[] } {
  const byToken = new Map<string, Set<string>>();
  const ids: string[] = [];
  let count = 0;
  for (const { id, token } of refs) {
    let held = byToken.get(token);
    if (held === undefined) byToken.set(token, (held = new Set()));
    if (held.has(id)) continue;
    held.add(id);
    ids.push(id);
    count++;
  }
  const values: unknown[] = [ids];
  if (byToken.size === 1) for (const token of byToken.keys()) values.push(token);
  else for (const [token, held] of byToken) values.push(token, [...held]);
  return { count, tokens: byToken.size, values };
}

/**
 * A write to rows its transaction locked changed every one of them, unless the locks did not hold:
 * Galera's are node-local, and another node's replicated write may take the rows. Then the
 * transaction is rolled back and tried again (retryLockConflicts) rather than reporting rows it
 * did not move.
 */
function expectAll(header: ResultSetHeader, locked: number, what: string): void {
  if (header.affectedRows !== locked) throw new LostRaceError(what);
}

function unique(ids: readonly Port.CommandId[]): Port.CommandId[] {
  return [...new Set(ids)];
}
