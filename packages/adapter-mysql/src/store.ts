import type * as Port from '@asynccmd/core';
import {
  isSqlExecutor,
  IdempotencyConflictError,
  InvalidArgumentError,
  silentLogger,
  TransactionRolledBackError,
  type Logger,
} from '@asynccmd/core';
import {
  claimWithinKeyLimits,
  namesKeyLimits,
  claimWithinLimits,
  guardedTransition,
  inCallersOrder,
  insertIdempotently,
  listPage,
  outcomeCountsFromRows,
  statsRowsFromRows,
  runThroughExecutor,
  checkedStore,
  HeadSkip,
  KeyWeightsCache,
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
  HeadSkipSettings,
  OutcomeCountRow,
  RateLimitStatements,
  StoreEngine,
  TransactionalCompletionEngine,
  TypeLimitStatements,
  KeyLimitStatements,
  KeyRateLimitStatements,
  TypePauseStatements,
  SubmitWindowStatements,
} from '@asynccmd/core/store-kit';
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
import {
  completeMarked,
  connectionSession,
  mysqlDependencyEngine,
  settleDependants,
} from './dependencies.js';
import { KEY_LOCK_SLOTS, migrationScript, runMigrations } from './migrations.js';
import { MysqlScheduleStore } from './schedules.js';
import { flowKeySql, type FlowKeySql } from './flow-keys.js';
import { claimLimitedDue, mysqlTypeLimitStatements, typeLimitSql, withinTypeLimit } from './type-limits.js';
import {
  claimKeyedDue,
  claimKeyRatedDue,
  keyLimitSql,
  keyRateLimitSql,
  mysqlKeyLimitStatements,
  mysqlKeyRateLimitStatements,
} from './key-limits.js';
import type { TypeLimitSql } from './type-limits.js';
import { mysqlRateLimitStatements } from './rate-limits.js';
import { MysqlWakeups } from './wakeups.js';
import { mysqlCleanupHorizon } from './cleanup-horizon.js';
import type { CommandRow } from './rows.js';
import { fromUtcText, toRecord, toUtcText } from './rows.js';
import type { MysqlSql } from './sql.js';
import { mysqlSql } from './sql.js';
import { HistoryMover, HistoryPartitions } from './history.js';
import { mysqlSubmitWindowStatements } from './submit-windows.js';

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
  /** Where the history's move and partitions report trouble; default silent. */
  readonly logger?: Logger;
  /** Claims past a slow head (core store-kit head-skip.ts); null or absent: always from the head. */
  readonly headSkip?: HeadSkipSettings | null;
}

/** Rows per multi-row INSERT, and the payload bytes one statement may carry (max_allowed_packet is 16 MiB by default). */
const INSERT_CHUNK_ROWS = 1000;
const INSERT_CHUNK_BYTES = 4 * 1024 * 1024;
const SERVER_STATUS_IN_TRANS = 0x0001;

/** The store port on MySQL / MariaDB, with its table, wake-ups and claim strategy. */
export type MysqlCommandStore = Port.CommandStore<Connection> &
  Required<
    Pick<
      Port.CommandStore<Connection>,
      | 'migrationScript'
      | 'schedules'
      | 'typeLimits'
      | 'typePauses'
      | 'rateLimits'
      | 'keyLimits'
      | 'keyRateLimits'
      | 'transactionalCompletion'
      | 'cleanupHorizon'
    >
  > & {
    readonly table: string;
    readonly wakeups: MysqlWakeups;
    /** The claim strategy in use, asking the server its version the first time under 'auto'. */
    claimStrategy(): Promise<ClaimStrategy>;
  };

/** The checked store over the MySQL engine. */
export function mysqlStore(parts: MysqlStoreParts): MysqlCommandStore {
  const engine = new MysqlEngine(parts);
  const extra = { table: engine.table, wakeups: engine.wakeups, claimStrategy: () => engine.claimStrategy() };
  return checkedStore<Connection, MysqlEngine, typeof extra>(
    engine,
    { maxPayloadBytes: parts.maxPayloadBytes },
    extra,
  );
}

/**
 * The store engine on MySQL 8 / MariaDB 10.6+ (core checkedStore checks its input) (and older servers through the legacy claim). `Tx` is a
 * mysql2/promise connection: submits run on the caller's connection and commit or roll back with
 * the caller's transaction; everything else runs on the store's pool.
 */
class MysqlEngine implements StoreEngine<Connection> {
  readonly dialect = 'mysql';
  readonly transactionHandle = {
    name: 'a mysql2/promise connection',
    is: (candidate: object): boolean => {
      const connection = candidate as { query?: unknown; execute?: unknown };
      return typeof connection.query === 'function' && typeof connection.execute === 'function';
    },
  };
  readonly table: string;
  private resolved: ClaimStrategy | null;
  private detecting: Promise<ClaimStrategy> | null = null;
  private readonly pool: Pool;
  private readonly ownsPool: boolean;
  private readonly claimPools: ClaimPools;
  private readonly sql: MysqlSql;
  private closed = false;
  readonly schedules: MysqlScheduleStore;
  readonly typeLimits: TypeLimitStatements;
  readonly keyLimits: KeyLimitStatements;
  private readonly keyLimitSql: ReturnType<typeof keyLimitSql>;
  readonly keyRateLimits: KeyRateLimitStatements;
  private readonly keyRateSql: ReturnType<typeof keyRateLimitSql>;
  private readonly flowSql: FlowKeySql;
  readonly rateLimits: RateLimitStatements;
  readonly cleanupHorizon: Port.CleanupHorizonProbe;
  readonly dependencies: DependencyEngine<Connection>;
  readonly submitWindows: SubmitWindowStatements<Connection>;
  /** The weights of fair-share types, parsed once per stored text. */
  private readonly keyWeights = new KeyWeightsCache();
  readonly typePauses: TypePauseStatements = {
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
  };
  private readonly limitSql: TypeLimitSql;
  /** Other processes' submits, seen by a polled probe (wakeups.ts). */
  readonly wakeups: MysqlWakeups;
  /** Finished commands into the history, and the history's partitions (history.ts). */
  private readonly mover: HistoryMover;
  private readonly partitions: HistoryPartitions;
  /** Whether each set of types' next plain claim reads from the head, or through unlocked candidates while that is slow. */
  private readonly headSkip: HeadSkip | null;

  constructor(parts: MysqlStoreParts) {
    this.wakeups = new MysqlWakeups(parts.pool, parts.table);
    this.pool = parts.pool;
    this.ownsPool = parts.ownsPool;
    this.claimPools = { pool: parts.pool, claimPool: parts.claimPool };
    this.table = parts.table;
    this.resolved = parts.strategy === 'auto' ? null : parts.strategy;
    this.sql = mysqlSql(parts.table);
    this.limitSql = typeLimitSql(parts.table);
    this.typeLimits = mysqlTypeLimitStatements(parts.pool, this.limitSql);
    this.keyLimitSql = keyLimitSql(parts.table);
    this.flowSql = flowKeySql(parts.table);
    this.keyLimits = mysqlKeyLimitStatements(parts.pool, this.keyLimitSql, this.flowSql);
    this.keyRateSql = keyRateLimitSql(parts.table);
    this.keyRateLimits = mysqlKeyRateLimitStatements(parts.pool, this.keyRateSql, this.flowSql);
    this.rateLimits = mysqlRateLimitStatements(parts.pool, parts.table);
    this.cleanupHorizon = mysqlCleanupHorizon(parts.pool);
    this.dependencies = mysqlDependencyEngine(this.pool, this.table);
    this.submitWindows = mysqlSubmitWindowStatements(this.pool, this.table);
    this.schedules = new MysqlScheduleStore(parts.pool, parts.table, (c) => insertParams(c, false));
    const logger = parts.logger ?? silentLogger;
    this.mover = new HistoryMover(
      parts.pool,
      parts.table,
      async () => (await this.claimStrategy()).name === 'skip-locked',
      logger,
    );
    this.partitions = new HistoryPartitions(parts.pool, parts.table, logger);
    this.headSkip = parts.headSkip ? new HeadSkip(parts.headSkip) : null;
  }

  /** With the 'auto' strategy, skipLocked is known once the server was asked (migrate or first claim). */
  get capabilities(): EngineCapabilities<Connection> {
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

  async migrationScript(options: { readonly all: boolean }): Promise<Port.MigrationScript> {
    return migrationScript(this.pool, this.table, options.all);
  }

  readonly transactionalCompletion: TransactionalCompletionEngine<Connection> = {
    complete: async (tx, checked) => {
      const params = [checked.resultJson ?? null, checked.id, checked.token];
      // No RETURNING on MariaDB: the affected rows say whether the claim held. The row lock taken
      // here holds until the caller's transaction ends.
      if (!isSqlExecutor(tx)) {
        if ((await write(tx, this.sql.completeInTransaction, params)).affectedRows !== 1) return false;
        // Its dependants are released in this same transaction (dependencies.ts).
        await settleDependants(connectionSession(tx), this.table, [{ id: checked.id, settled: 'success' }]);
        return true;
      }
      // An SqlExecutor hands back no affected rows: the row, read in the same transaction (which
      // sees its own write), says it. Only this attempt's update can make it SUCCESS under its token.
      await runThroughExecutor(tx, this.sql.completeInTransaction, params, 'question-mark');
      const held = await runThroughExecutor(
        tx,
        this.sql.succeededUnder,
        [checked.id, checked.token, checked.id, checked.token],
        'question-mark',
      );
      if (held.length !== 1) return false;
      await settleDependants(
        {
          select: async <T>(sql: string, values: readonly Port.SqlValue[]) =>
            (await runThroughExecutor(tx, sql, values, 'question-mark')) as T[],
          write: async (sql, values) => {
            await runThroughExecutor(tx, sql, values, 'question-mark');
          },
        },
        this.table,
        [{ id: checked.id, settled: 'success' }],
      );
      return true;
    },
    succeededUnder: async (checked) => {
      const rows = await retryConnectionLoss(() =>
        select(this.pool, this.sql.succeededUnder, [checked.id, checked.token, checked.id, checked.token]),
      );
      return rows.length === 1;
    },
    isTransient: (error) => isConnectionLost(error) || isLockConflict(error),
    throughSqlExecutor: true,
    // Names are checked identifiers (core checked-store). InnoDB keeps the row locks taken after a
    // savepoint it rolls back to until the transaction ends.
    savepoints: {
      open: async (tx, name) => {
        await write(tx, `SAVEPOINT ${name}`);
      },
      rollbackTo: async (tx, name) => {
        await write(tx, `ROLLBACK TO SAVEPOINT ${name}`);
      },
      completeAll: (tx, checked) => this.completeAllIn(tx, checked),
    },
  };

  async transaction<T>(fn: (tx: Connection) => Promise<T>): Promise<T> {
    // The server's default isolation: this is the caller's business transaction, not a claim.
    return inTransaction(this.pool, false, fn);
  }

  async insert(
    tx: Connection | Port.SqlExecutor,
    checked: readonly CheckedCommand[],
  ): Promise<Port.CommandId[]> {
    const rows = checked.map((c) => insertParams(c, false));
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
    checked: CheckedCommand & { readonly bizKey: string },
    onPending: Port.OnPending,
  ): Promise<Port.InsertResult> {
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

  async claimDue(params: CheckedClaimDue): Promise<Port.ClaimedCommand[]> {
    this.mover.nudge();
    const { types, limit } = params;
    const round = {
      token: params.token,
      instance: params.instance,
      leaseMicros: params.leaseMs * 1000,
      now: toUtcText(params.now),
      types: [...types],
      limit,
    };
    if (namesKeyLimits(params)) {
      return claimWithinKeyLimits(types, params, limit, {
        claimKeyRated: (type, max) =>
          retryLockConflicts(() =>
            claimKeyRatedDue(this.pool, this.keyRateSql, this.flowSql, this.sql, { ...round, type, max }),
          ),
        claimKeyed: (type, max) =>
          retryLockConflicts(() =>
            claimKeyedDue(this.pool, this.keyLimitSql, this.flowSql, this.sql, {
              ...round,
              type,
              max,
              weights: this.keyWeights,
            }),
          ),
        // The round's token reads back the keyed types' rows too: only the others' here.
        others: (others, max) =>
          this.claimDue({ ...params, types: others, limit: max, keyedTypes: [], keyRatedTypes: [] }).then(
            (rows) => rows.filter((r) => others.includes(r.type)),
          ),
      });
    }
    const rows = await this.claimRound(round, params.limitedTypes);
    // A full claim tells the wake-up probe that this claimer is draining a backlog (wakeups.ts).
    this.wakeups.claimed(types, limit, rows.length);
    return rows;
  }

  /** One claim round, its lost races and lost connections settled (see below). */
  private async claimRound(
    round: ClaimRound,
    limitedTypes: readonly string[],
  ): Promise<Port.ClaimedCommand[]> {
    const { types, limit } = round;
    try {
      const strategy = await this.claimStrategy();
      // The round's token reads back every row it claimed, those of limited types too: only r's here.
      const claim = (r: ClaimRound): Promise<Port.ClaimedCommand[]> =>
        this.fromHeadOrPast(r.types, (unlockedCandidates) =>
          retryLockConflicts(() =>
            strategy.claim(this.claimPools, this.sql, { ...r, unlockedCandidates }),
          ).then((rows) => rows.filter((row) => r.types.includes(row.type))),
        );
      if (limitedTypes.length === 0) return await claim(round);
      return await claimWithinLimits(types, limitedTypes, limit, {
        claimLimited: (type, max) =>
          retryLockConflicts(() =>
            withinTypeLimit(this.pool, this.limitSql, type, max, (conn, free) =>
              claimLimitedDue(conn, this.sql, strategy, { ...round, type, free }),
            ),
          ).then((rows) => rows.map(toRecord) as Port.ClaimedCommand[]),
        claimOthers: (others, max) => claim({ ...round, types: others, limit: max }),
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

  /**
   * A claim of `types` from the head of the claim order, or, while claims from the head are slow,
   * through candidates read without locks (core store-kit head-skip.ts): InnoDB purges no
   * delete-marked entry of idx_claim while a snapshot older than it is held, every command claimed
   * leaves one at the head, and a locking read under READ COMMITTED looks each one up.
   */
  private async fromHeadOrPast(
    types: readonly string[],
    claim: (unlockedCandidates: boolean) => Promise<CommandRow[]>,
  ): Promise<Port.ClaimedCommand[]> {
    const headSkip = this.headSkip;
    const records = (rows: CommandRow[]): Port.ClaimedCommand[] =>
      rows.map(toRecord) as Port.ClaimedCommand[];
    if (headSkip === null) return records(await claim(false));
    const began = performance.now();
    const start = headSkip.startOf(types, began);
    const claimed = records(await claim(start !== null));
    const ended = performance.now();
    headSkip.claimed(types, start, ended - began, claimed, ended);
    return claimed;
  }

  async claimById(params: CheckedClaimById): Promise<Port.ClaimedCommand | null> {
    const { id, token, instance, types } = params;
    const lease = params.leaseMs * 1000;
    const now = toUtcText(params.now);
    const readBack = async (): Promise<Port.ClaimedCommand | null> => {
      const [row] = await select<CommandRow>(this.pool, this.sql.claimedRow, [id, token]);
      return row ? (toRecord(row) as Port.ClaimedCommand) : null;
    };
    const mark = (db: Queryable, withoutKey: 0 | 1) =>
      types === null
        ? write(db, this.sql.claimById, [token, instance, lease, id, now, withoutKey])
        : write(db, this.sql.claimByIdOfTypes, [token, instance, lease, id, now, types, withoutKey]);
    /** Marks the command claimed on `db`; false when it is not claimable. */
    const claimOn = async (db: Queryable): Promise<boolean> => {
      if ((await mark(db, 1)).affectedRows > 0) return true;
      // Not claimable as a command without a key: perhaps one with a key, first of it.
      const first = await select(db, this.sql.firstOfKeyById, [id]);
      return first.length > 0 && (await mark(db, 0)).affectedRows > 0;
    };
    const limited = params.limitedTypes;
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
    const lease = leaseMs * 1000;
    const { count, tokens, values } = refValues(refs);
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

  async reportProgress(reports: readonly Port.ProgressReport[]): Promise<Port.CommandId[]> {
    const { count, tokens, values } = refValues(reports);
    const bound = [
      ...reports.flatMap((r) => [r.id, r.token, r.done]),
      ...reports.flatMap((r) => [r.id, r.token, r.total]),
      ...values,
    ];
    // Writing the same progress twice is harmless: a lost connection means do it again.
    const updated = await retryConnectionLoss(() =>
      retryLockConflicts(() => write(this.pool, this.sql.reportProgress(reports.length, tokens), bound)),
    );
    const ids = reports.map((r) => r.id);
    if (updated.affectedRows === count) return ids;
    const held = await select<{ id: string }>(this.pool, this.sql.heldRefs(tokens), values);
    return inCallersOrder(
      ids,
      held.map((r) => String(r.id)),
    );
  }

  /**
   * The statement that completes the refs without dependants (those with them it leaves), with
   * its values, and the refs' count, tokens and values.
   */
  private completeWrite(checkedRefs: readonly CheckedCompletedAttempt[]) {
    const { count, tokens, values } = refValues(checkedRefs);
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
    return { sql, bound, count, tokens, values };
  }

  /**
   * The SUCCESS of attempts that shared `tx` (a store transaction), fenced: the commonest write,
   * then those it left (with dependants, settled in `tx`); the ids completed, read in `tx`.
   */
  private async completeAllIn(
    tx: Connection,
    checked: readonly CheckedCompletedAttempt[],
  ): Promise<Port.CommandId[]> {
    const { sql, bound, count, tokens, values } = this.completeWrite(checked);
    const updated = await write(tx, sql, bound);
    if (updated.affectedRows < count)
      await completeMarked(this.table, this.sql.completeHeld, checked, (fn) => fn(tx));
    const ids = unique(checked.map((r) => r.id));
    if (updated.affectedRows === count && ids.length === count) return ids;
    const done = await select<{ id: string }>(tx, this.sql.completedBy(tokens), [...values, ...values]);
    return inCallersOrder(
      ids,
      done.map((r) => String(r.id)),
    );
  }

  async complete(checkedRefs: readonly CheckedCompletedAttempt[]): Promise<Port.CommandId[]> {
    this.mover.nudge();
    const { sql, bound, count, tokens, values } = this.completeWrite(checkedRefs);
    // Completing again after a lost connection is harmless: the read below reports the refs whose
    // command is SUCCESS under their own claim, finished by the first try or the second (which,
    // finding the row SUCCESS, leaves the first try's result as it is).
    const updated = await retryConnectionLoss(() => retryLockConflicts(() => write(this.pool, sql, bound)));
    if (updated.affectedRows < count) {
      // Those the fast write left alone because they have dependants (or fenced out, or done).
      const released = await retryLockConflicts(() =>
        completeMarked(this.table, this.sql.completeHeld, checkedRefs, (fn) =>
          inTransaction(this.pool, true, fn),
        ),
      );
      this.wakeups.released(released);
    }
    const ids = unique(checkedRefs.map((r) => r.id));
    if (updated.affectedRows === count && ids.length === count) return ids;
    const done = await select<{ id: string }>(this.pool, this.sql.completedBy(tokens), [
      ...values,
      ...values,
    ]);
    return inCallersOrder(
      ids,
      done.map((r) => String(r.id)),
    );
  }

  async fail(attempts: readonly CheckedFailedAttempt[]): Promise<Port.CommandId[]> {
    const checked = attempts.map((a) => ({ ...a, nextRunAt: toUtcText(a.nextRunAt) }));
    const [one] = checked;
    if (one === undefined) return [];
    // A dead letter may have dependants to settle in its transaction: it takes the path below.
    if (checked.length === 1 && one.status !== 'DEAD') {
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
    let released = 0;
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
        released = await settleDependants(
          connectionSession(conn),
          this.table,
          rows.filter((c) => c.status === 'DEAD').map((c) => ({ id: c.id, settled: 'failure' as const })),
        );
        return new Set(rows.map((c) => c.id));
      }),
    );
    this.wakeups.released(released);
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
    const checked = refs;
    const { tokens, values } = refValues(checked);
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

  async reclaimHung(reclaim: CheckedReclaim): Promise<Port.ReclaimedCommand[]> {
    const { limit, maxRescues, deadError: dead } = reclaim;
    const strategy = await this.claimStrategy();
    if ((await retryConnectionLoss(() => select(this.pool, this.sql.anyHung))).length === 0) return [];
    let released = 0;
    const reclaimed = await retryLockConflicts(() =>
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
        const reclaimed = hung.map((h) => ({
          id: String(h.id),
          type: h.type,
          status:
            Number(h.rescue_count) + 1 - Number(h.rescue_count_at_retry) > maxRescues
              ? ('DEAD' as const)
              : ('PENDING' as const),
        }));
        released = await settleDependants(
          connectionSession(conn),
          this.table,
          reclaimed
            .filter((r) => r.status === 'DEAD')
            .map((r) => ({ id: r.id, settled: 'failure' as const })),
        );
        return reclaimed;
      }),
    );
    this.wakeups.released(released);
    return reclaimed;
  }

  async retry(id: Port.CommandId, now: Date): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('retry', id, [toUtcText(now)]);
  }

  async requeue(id: Port.CommandId, now: Date): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('requeue', id, [toUtcText(now)]);
  }

  async kill(id: Port.CommandId, why: string | null): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('kill', id, [why, why]);
  }

  async cancel(
    id: Port.CommandId,
    reason: string | null,
  ): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.adminTransition('cancel', id, [reason]);
  }

  async get(key: Port.CommandId): Promise<Port.CommandRecord | null> {
    const [row] = await retryConnectionLoss(() => select<CommandRow>(this.pool, this.sql.get, [key, key]));
    return row ? toRecord(row) : null;
  }

  async getMany(keys: readonly Port.CommandId[]): Promise<Port.CommandRecord[]> {
    const rows = await retryConnectionLoss(() =>
      select<CommandRow>(this.pool, this.sql.getMany, [keys, keys]),
    );
    return rows.map(toRecord);
  }

  async list(query: CheckedListQuery): Promise<Port.ListPage> {
    const { limit, fetch, statuses, type, bizKey, after } = query;
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
    // The history holds SUCCESS only: a list of other statuses leaves it out.
    const withHistory = statuses === null || statuses.includes('SUCCESS');
    const bound = withHistory ? [...values, fetch, ...values, fetch, fetch] : [...values, fetch];
    const rows = await retryConnectionLoss(() =>
      select<CommandRow>(this.pool, this.sql.list(filters, withHistory), bound),
    );
    return listPage(rows, limit, toRecord);
  }

  async stats(now: Date): Promise<Port.StoreStats> {
    const at = toUtcText(now);
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
    const { now, deadLetterLimit } = params;
    const at = toUtcText(now);
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
    const { from, to, latencyBoundsMs } = params;
    const rows = await retryConnectionLoss(() =>
      select<OutcomeCountRow>(this.pool, this.sql.outcomeCounts(latencyBoundsMs.length), [
        ...latencyBoundsMs.map((ms) => ms * 1000),
        from,
        to,
        from,
        to,
      ]),
    );
    return outcomeCountsFromRows(rows);
  }

  async purge(purge: CheckedPurge): Promise<number> {
    const { limit } = purge;
    const olderThan = toUtcText(purge.olderThan);
    let deleted = 0;
    // With edges or workflow steps about, a batch's ids are read first, and its links deleted with it.
    const [links] = await select<{ linked: number | string }>(this.pool, this.sql.anyLinks);
    const linked = Number(links?.linked) === 1;
    const purgeBatch = (
      plain: string,
      ids: string,
      byIds: string,
      values: readonly unknown[],
    ): Promise<number> =>
      retryLockConflicts(async () => {
        if (!linked) return (await write(this.pool, plain, values)).affectedRows;
        return inTransaction(this.pool, true, async (conn) => {
          const gone = (await select<{ id: string }>(conn, ids, values)).map((r) => String(r.id));
          if (gone.length === 0) return 0;
          await write(conn, byIds, [gone]);
          for (const text of this.sql.purgeLinks) await write(conn, text, [gone]);
          return gone.length;
        });
      });
    if (purge.statuses.includes('SUCCESS')) {
      // What finished before the purge is in the history first; whole partitions past the cutoff
      // are dropped, then what they did not cover is deleted row by row.
      await this.mover.moveAll();
      deleted += await this.partitions.maintain(purge.olderThan);
      if (deleted < limit) {
        deleted += await purgeBatch(
          this.sql.purgeHistory,
          this.sql.purgeHistoryIds,
          this.sql.purgeHistoryByIds,
          [olderThan, limit - deleted],
        );
      }
    }
    for (const status of purge.statuses) {
      if (deleted >= limit) break;
      const batch = limit - deleted;
      deleted += await purgeBatch(this.sql.purge, this.sql.purgeIds, this.sql.purgeByIds, [
        status,
        olderThan,
        batch,
      ]);
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
    await this.mover.close();
    await Promise.all([this.ownsPool ? this.pool.end() : undefined, this.claimPools.claimPool?.end()]);
  }

  // ── internals ──────────────────────────────────────────────────────────────────────────────────

  private async claimedBy(token: string): Promise<Port.ClaimedCommand[]> {
    const rows = await select<CommandRow>(this.pool, this.sql.claimedBy, [token]);
    return rows.map(toRecord) as Port.ClaimedCommand[];
  }

  /**
   * One multi-row INSERT; its ids are consecutive (InnoDB, simple insert), stepping by
   * auto_increment_increment (a session variable: Galera sets it per node), read on the same
   * connection before it, with the key paths of its types.
   */
  private async insertChunk(tx: Queryable, rows: readonly InsertParams[]): Promise<Port.CommandId[]> {
    let step = 1n;
    let values: unknown[] = rows.flat();
    if (rows.length > 1) {
      const [plan] = await select<{ step: string | number; paths: string | Record<string, string> | null }>(
        tx,
        this.sql.insertPlan,
        [[...new Set(rows.map((r) => r[0]))]],
      );
      step = BigInt(String(plan?.step ?? 1));
      // JSON text, or already parsed where the server types it JSON (MySQL).
      const given = plan?.paths ?? null;
      const paths = (typeof given === 'string' ? JSON.parse(given) : (given ?? {})) as Record<string, string>;
      // In a batch the last two values of a row are its type's key path (null: none).
      values = rows.flatMap((r) => {
        const path = paths[r[0]] ?? null;
        return [...r.slice(0, -2), path, path];
      });
    }
    const header: ResultSetHeader = await write(tx, this.sql.insertMany(rows.length), values);
    let first: bigint;
    if (typeof header.insertId === 'number' && !Number.isSafeInteger(header.insertId)) {
      const [last] = await select<{ id: string }>(tx, this.sql.lastInsertId);
      first = BigInt(String(last?.id));
    } else {
      first = BigInt(String(header.insertId));
    }
    const ids = rows.map((_, i) => String(first + BigInt(i) * step));
    this.wakeups.insertedHere(ids[ids.length - 1] ?? null);
    return ids;
  }

  /**
   * One guarded write in a short transaction, then the row as it now is: a refusal is explained
   * from it (core guardedTransition).
   */
  private async adminTransition(
    name: Port.AdminTransition,
    key: Port.CommandId,
    leading: readonly unknown[],
  ): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    let released = 0;
    const outcome = await guardedTransition(name, key, () =>
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
          if (updated.affectedRows === 1 && (name === 'kill' || name === 'cancel')) {
            released = await settleDependants(connectionSession(conn), this.table, [
              { id: key, settled: 'failure' },
            ]);
          }
          const [row] = await select<CommandRow>(conn, this.sql.get, [key, key]);
          if (!row) return { unmatched: null };
          return updated.affectedRows === 1 ? { applied: toRecord(row) } : { unmatched: row.status };
        }),
      ),
    );
    this.wakeups.released(released);
    return outcome;
  }

  private async idempotencyConflict(conn: PoolConnection, id: string): Promise<IdempotencyConflictError> {
    const [row] = await select<CommandRow>(conn, this.sql.get, [id, id]);
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
  string,
  string,
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
    // The type again, twice, for the row's flow key (flow-keys.ts insertedFlowKey).
    c.type,
    c.type,
  ];
}

/** A replacing submit's contents, as replaceHolder and insertReplacingPending bind them. */
function replacingParams(c: CheckedCommand, withRunAt: boolean): unknown[] {
  const contents: unknown[] = [c.payloadJson, c.maxRetry, c.headersJson, c.priority];
  if (withRunAt) contents.push(c.runAt === null ? null : toUtcText(c.runAt));
  return contents;
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
