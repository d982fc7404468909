import type * as E from 'fp-ts/lib/Either.js';
import { InvalidArgumentError, isSqlExecutor, LIMITS, silentLogger, type Logger } from '@asynccmd/core';
import {
  byClaimOrder,
  claimWithinKeyLimits,
  claimWithinKeyRate,
  keyedCandidatesFrom,
  inTurns,
  namesKeyLimits,
  claimWithinLimits,
  compareIds,
  guardedTransition,
  inCallersOrder,
  insertIdempotently,
  keyHeldBy,
  listPage,
  outcomeCountsFromRows,
  statsRowsFromRows,
  runThroughExecutor,
  checkedStore,
  HeadSkip,
  KeyWeightsCache,
  ReclaimWindow,
  TRANSITION_SOURCES,
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
  CheckedStore,
  DependencyEngine,
  HeadSkipSettings,
  EngineCapabilities,
  KeyLimitStatements,
  KeyRateLimitStatements,
  OutcomeCountRow,
  RateLimitStatements,
  StoreEngine,
  SubmitWindowStatements,
  TransactionalCompletionEngine,
  TypeLimitStatements,
  TypePauseStatements,
} from '@asynccmd/core/store-kit';
import type * as Port from '@asynccmd/core';
import { preparedRows, type PostgresConnection } from './connection.js';
import {
  insertIdempotentThroughExecutor,
  insertEachThroughExecutor,
  insertThroughExecutor,
} from './executor-insert.js';
import { postgresCleanupHorizon } from './cleanup-horizon.js';
import { postgresDependencyEngine } from './dependencies.js';
import { appliedVersions, migrate, migrationScript } from './migrations.js';
import { PostgresScheduleStore } from './schedules.js';
import { postgresTypeLimitStatements, typeLimitSql, withinTypeLimit } from './type-limits.js';
import { keyLimitSql, postgresKeyLimitStatements, withinKeyLimit } from './key-limits.js';
import { keyRateStatements, postgresKeyRateLimitStatements } from './key-rate-limits.js';
import { postgresKeyedReader, postgresRunningPerKey } from './flow-keys.js';
import { postgresRateLimitStatements } from './rate-limits.js';
import { postgresSubmitWindowStatements } from './submit-windows.js';
import type { TableNames } from './names.js';
import type { NotifyWakeups } from './notify-wakeups.js';
import { claimedRecord, rowParams, toDate, toRecord } from './rows.js';
import { StalePlanWatch } from './stale-plans.js';
import { HistoryPartitions } from './history-partitions.js';
import type { ClaimedRow, CommandRow } from './rows.js';
import { buildSql } from './sql.js';
import type { Sql } from './sql.js';

export interface PostgresEngineParts<Tx> {
  readonly connection: PostgresConnection<Tx>;
  readonly names: TableNames;
  /** Wake-ups and revocations over LISTEN/NOTIFY on the table's channel. */
  readonly wakeups: NotifyWakeups;
  /** Largest payload accepted; migrations write it into the SQL submit functions' check too. */
  readonly maxPayloadBytes?: number;
  /** For logs and metrics labels. Default 'postgres'. */
  readonly dialect?: string;
  /**
   * Whether the store offers `cleanupHorizon`: other sessions of the server can hold the cleanup
   * back (never with one connection and nothing else on the database, as PGlite).
   */
  readonly cleanupHorizon: boolean;
  /** Claims past a slow head (core store-kit head-skip.ts); null: always from the head. Default its defaults. */
  readonly headSkip?: HeadSkipSettings | null;
  /** Where the store says it analyzed its table (stale-plans.ts). Default silent. */
  readonly logger?: Logger;
}

const UNIQUE_VIOLATION = '23505';
/** What the json cast answers for text that is not JSON (here: only a result can be). */
const INVALID_TEXT_REPRESENTATION = '22P02';

/**
 * The store engine on PostgreSQL, over any `PostgresConnection` (see core `CommandStore` for each
 * operation's contract; core checkedStore checks its input). Submits run in the caller's
 * transaction; everything else is one statement outside any transaction — claims, heartbeats and
 * outcomes on the connection's hot path — or a transaction of the store's own (claims within
 * limits, schedule ticks, migrations).
 */
export class PostgresEngine<Tx> implements StoreEngine<Tx> {
  readonly dialect: string;
  capabilities: EngineCapabilities<Tx>;
  readonly transactionHandle: { readonly name: string; is(candidate: object): boolean };
  readonly wakeups: NotifyWakeups;
  /** Requeues and kills of running commands, heard where the wake-ups are. */
  readonly revocations?: Port.RevocationChannel;
  protected readonly connection: PostgresConnection<Tx>;
  protected readonly sql: Sql;
  protected readonly names: TableNames;
  /** The history's time partitions, dropped and made by the purge (history-partitions.ts). */
  private readonly historyPartitions: HistoryPartitions<Tx>;
  private readonly maxPayloadBytes: number;
  protected closing: Promise<void> | null = null;
  readonly schedules: PostgresScheduleStore<Tx>;
  readonly typeLimits: TypeLimitStatements;
  readonly keyLimits: KeyLimitStatements;
  readonly keyRateLimits: KeyRateLimitStatements;
  readonly rateLimits: RateLimitStatements;
  readonly typePauses: TypePauseStatements = {
    insert: async (type, reason) =>
      (await this.connection.query(this.sql.typePause, [type, reason])).rowCount === 1,
    remove: async (type) => (await this.connection.query(this.sql.typeResume, [type])).rowCount === 1,
    read: async () =>
      (
        await this.query<{ type: string; paused_at: string; reason: string | null }>(
          this.sql.typePauseList,
          [],
        )
      ).map((r) => ({ type: r.type, pausedAt: toDate(r.paused_at), reason: r.reason })),
  };
  private readonly limitSql: ReturnType<typeof typeLimitSql>;
  private readonly keyLimitSql: ReturnType<typeof keyLimitSql>;
  readonly cleanupHorizon?: Port.CleanupHorizonProbe;
  readonly dependencies: DependencyEngine<Tx>;
  readonly submitWindows: SubmitWindowStatements<Tx>;
  /** The weights of fair-share types, parsed once per stored text. */
  private readonly keyWeights = new KeyWeightsCache();
  /** Where each set of types' next plain claim starts: the head, or past it while that is slow. */
  protected readonly headSkip: HeadSkip | null;
  /** The window of the next hung reclaim: every lapsed lease, or those lapsed lately while that is slow. */
  private readonly reclaimWindow: ReclaimWindow | null;
  /** Has the table analyzed when a fenced write is slow enough to point at a stale cached plan. */
  private readonly stalePlans: StalePlanWatch;

  readonly transactionalCompletion: TransactionalCompletionEngine<Tx> = this.completionEngine();

  /** The engine's transactionalCompletion; an engine that can send it with the COMMIT adds completeAtCommit. */
  protected completionEngine(): TransactionalCompletionEngine<Tx> {
    const complete = async (
      tx: Tx | Port.SqlExecutor,
      checked: CheckedCompletedAttempt,
    ): Promise<boolean> => {
      const params = [checked.id, checked.token, checked.resultJson ?? null];
      // On the caller's client (or its ORM's transaction): the row lock it takes holds until that
      // transaction ends.
      const write = async (text: string): Promise<boolean> => {
        const written = isSqlExecutor(tx)
          ? runThroughExecutor(tx, text, params, 'numbered')
          : this.connection.preparedIn<{ id: string }>(tx, text, params);
        const rows = await written.catch((e: unknown) => {
          if ((e as { code?: unknown } | null)?.code === INVALID_TEXT_REPRESENTATION) {
            throw new InvalidArgumentError('a result must be JSON text');
          }
          throw e;
        });
        return rows.length === 1;
      };
      // A command with dependants (or a schedule's tick) is left by the commonest statement.
      return this.stalePlans.timed(
        1,
        async () =>
          (await write(this.sql.completeInTransaction)) || write(this.sql.completeInTransactionSettling),
      );
    };
    return {
      complete,
      // Names are checked identifiers (core checked-store).
      savepoints: {
        open: async (tx, name) => {
          await this.connection.queryIn(tx, `SAVEPOINT ${name}`);
        },
        rollbackTo: async (tx, name) => {
          await this.connection.queryIn(tx, `ROLLBACK TO SAVEPOINT ${name}`);
        },
        completeAll: (tx, checked) => this.completeAllIn(tx, checked),
      },
      succeededUnder: async (checked) => {
        const rows = await this.query(this.sql.succeededUnder, [checked.id, checked.token]);
        return rows.length === 1;
      },
      isTransient: (error) => this.connection.isTransient(error),
      throughSqlExecutor: true,
    };
  }

  constructor(parts: PostgresEngineParts<Tx>) {
    const connection = parts.connection;
    this.connection = connection;
    this.dialect = parts.dialect ?? 'postgres';
    this.transactionHandle = connection.transactionHandle;
    this.names = parts.names;
    this.wakeups = parts.wakeups;
    this.headSkip = parts.headSkip === null ? null : new HeadSkip(parts.headSkip);
    this.reclaimWindow = parts.headSkip === null ? null : new ReclaimWindow(parts.headSkip);
    const logger = parts.logger ?? silentLogger;
    this.stalePlans = new StalePlanWatch(
      async () => {
        await this.connection.query(`ANALYZE ${parts.names.table}`);
      },
      {
        analyzing: (ms, rows) =>
          logger.info(
            { ms: Math.round(ms), rows, table: parts.names.table },
            'asynccmd: a fenced write took long enough to point at a plan cached while the table was small; analyzing the table so that plans are made again',
          ),
        failed: (err) => logger.warn({ err }, 'asynccmd: analyzing the command table failed'),
      },
    );
    this.historyPartitions = new HistoryPartitions(connection, parts.names, logger);
    const delivers = this.wakeups.delivers;
    if (delivers) {
      this.revocations = { subscribe: (onRevoked) => this.wakeups.subscribeRevocations(onRevoked) };
    }
    this.capabilities = {
      skipLocked: true,
      wakeups: delivers,
      revocations: delivers,
      sqlExecutor: true,
      commitRiding: null,
    };
    this.maxPayloadBytes = parts.maxPayloadBytes ?? LIMITS.defaultPayloadBytes;
    this.sql = buildSql(parts.names);
    this.schedules = new PostgresScheduleStore(connection, parts.names);
    this.limitSql = typeLimitSql(parts.names, parts.names.table);
    this.typeLimits = postgresTypeLimitStatements(connection, this.limitSql);
    this.keyLimitSql = keyLimitSql(parts.names);
    this.keyLimits = postgresKeyLimitStatements(connection, this.keyLimitSql, this.sql.flow);
    this.keyRateLimits = postgresKeyRateLimitStatements(connection, this.sql.keyRate, this.sql.flow);
    this.rateLimits = postgresRateLimitStatements(connection, parts.names);
    if (parts.cleanupHorizon) this.cleanupHorizon = postgresCleanupHorizon(connection, parts.names);
    this.dependencies = postgresDependencyEngine(connection, parts.names);
    this.submitWindows = postgresSubmitWindowStatements(connection, parts.names);
  }

  /** The schema-qualified, quoted table name, e.g. `"public"."async_command"`. */
  get table(): string {
    return this.names.table;
  }

  migrate(): Promise<void> {
    return migrate(this.connection, this.names, { maxPayloadBytes: this.maxPayloadBytes });
  }

  async migrationScript(options: { readonly all: boolean }): Promise<Port.MigrationScript> {
    const applied = options.all ? new Set<number>() : await appliedVersions(this.connection, this.names);
    return migrationScript(this.names, applied, { maxPayloadBytes: this.maxPayloadBytes });
  }

  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.connection.transaction(fn);
  }

  async insert(tx: Tx | Port.SqlExecutor, values: readonly CheckedCommand[]): Promise<Port.CommandId[]> {
    if (values.some((v) => v.orderingKey !== null)) {
      // A keyed command's id is drawn under its key's lock (sql.ts insertKeyed).
      if (isSqlExecutor(tx))
        return insertEachThroughExecutor(tx, this.sql.insertOneKeyed, values.map(rowParams));
      const params = columnArrays(values);
      return (await this.connection.preparedIn<{ id: string }>(tx, this.sql.insertKeyed, params)).map(
        (r) => r.id,
      );
    }
    if (isSqlExecutor(tx)) return insertThroughExecutor(tx, this.sql.insertOne, values.map(rowParams));
    if (values.length === 1) return this.insertOne(tx, rowParams(values[0]!));
    const rows = await this.connection.preparedIn<{ id: string }>(tx, this.sql.insert, columnArrays(values));
    return rows.map((r) => r.id);
  }

  /** One command without an ordering key into `tx`; `params` as rows.ts rowParams gives them. */
  protected async insertOne(tx: Tx, params: unknown[]): Promise<Port.CommandId[]> {
    return (await this.connection.preparedIn<{ id: string }>(tx, this.sql.insertOne, params)).map(
      (r) => r.id,
    );
  }

  async insertIdempotent(
    tx: Tx | Port.SqlExecutor,
    checked: CheckedCommand & { readonly bizKey: string },
    onPending: Port.OnPending,
  ): Promise<Port.InsertResult> {
    const keyed = checked.orderingKey !== null;
    const params = rowParams(checked);
    if (onPending !== 'keep') params.push(onPending);
    const statement =
      onPending === 'keep'
        ? keyed
          ? this.sql.insertIdempotentKeyed
          : this.sql.insertIdempotent
        : keyed
          ? this.sql.insertIdempotentReplacingKeyed
          : this.sql.insertIdempotentReplacing;
    return insertIdempotently(checked, async () => {
      if (isSqlExecutor(tx)) return insertIdempotentThroughExecutor(tx, statement, params);
      const [row] = await this.connection.preparedIn<{ id: string; duplicate: string; replaced?: string }>(
        tx,
        statement,
        params,
      );
      // Nothing back: the key's holder committed after this statement began, or finished since.
      return row ? { id: row.id, duplicate: row.duplicate === 't', replaced: row.replaced === 't' } : null;
    });
  }

  async claimDue(p: CheckedClaimDue): Promise<Port.ClaimedCommand[]> {
    const { types, limit } = p;
    const values = [p.now.toISOString(), types, limit, p.token, p.leaseMs, p.instance];
    const connection = this.connection;
    if (namesKeyLimits(p)) {
      return claimWithinKeyLimits(types, p, limit, {
        claimKeyRated: (type, max) =>
          connection.claimTransaction((tx) =>
            claimWithinKeyRate(
              max,
              (row: Port.ClaimedCommand) => row.id,
              keyRateStatements(
                (text, params) => preparedRows(connection, tx, text, params ?? []),
                this.sql.keyRate,
                this.sql.flow,
                {
                  type,
                  now: values[0] as string,
                  nowMs: p.now.getTime(),
                  claimValues: values.slice(3),
                  claim: async (text, claimValues) =>
                    claimedRecords(
                      (await preparedRows<Tx, ClaimedRow>(connection, tx, text, claimValues)).rows,
                      values,
                    ),
                },
              ),
              inTurns,
            ),
          ),
        claimKeyed: (type, max) => {
          const reader = (tx: Tx) =>
            postgresKeyedReader(
              { query: (text, params) => preparedRows(connection, tx, text, params ?? []) },
              this.sql.flow,
              type,
              values[0] as string,
            );
          // The loose scan of the keys, the round's longest read, runs before the type's lock: one
          // claim scans while another holds it. The RUNNING counts are read under it.
          return withinKeyLimit(
            connection,
            this.keyLimitSql,
            type,
            async (tx) => (await reader(tx).heads(false)).heads,
            async (tx, { keyField, maxRunning, weightsJson }, heads) => {
              const running = await postgresRunningPerKey(
                { query: (text, params) => preparedRows(connection, tx, text, params ?? []) },
                this.sql.flow,
                type,
              );
              const weights = this.keyWeights.of(weightsJson);
              const picked = await keyedCandidatesFrom(heads, running, reader(tx).rows, {
                cap: maxRunning,
                limit: max,
                nowMs: p.now.getTime(),
                countRunning: true,
                ...(weights === undefined ? {} : { weights }),
              });
              if (picked.length === 0) return [];
              const claimed = await preparedRows<Tx, ClaimedRow>(connection, tx, this.sql.keyRate.claim, [
                picked.map((c) => c.id),
                ...values.slice(3),
              ]);
              return inTurns(claimedRecords(claimed.rows, values), keyField, weights);
            },
          );
        },
        others: (others, max) =>
          this.claimDue({ ...p, types: others, limit: max, keyedTypes: [], keyRatedTypes: [] }),
      });
    }
    if (p.limitedTypes.length === 0) return this.claimUnlimited(values);
    return claimWithinLimits(types, p.limitedTypes, limit, {
      claimLimited: (type, max) =>
        withinTypeLimit(connection, this.limitSql, type, max, async (tx, free) => {
          const claimed = await preparedRows<Tx, ClaimedRow>(connection, tx, this.sql.claimDue, [
            values[0],
            [type],
            free,
            ...values.slice(3),
          ]);
          return claimedRecords(claimed.rows, values);
        }),
      claimOthers: (others, max) => this.claimUnlimited([values[0], others, max, ...values.slice(3)]),
    });
  }

  /** claimDue's values: now, types, limit, token, lease ms, instance. */
  protected async claimUnlimited(values: unknown[]): Promise<Port.ClaimedCommand[]> {
    return this.claimFromHeadOrPast(values, (text, v) => this.connection.hot<ClaimedRow>(text, v));
  }

  /**
   * claimDue's statement run by `run`, from the head of the claim order, or past it while claims
   * from the head are slow (core store-kit head-skip.ts). `values` are claimDue's.
   */
  protected async claimFromHeadOrPast(
    values: unknown[],
    run: (text: string, values: unknown[]) => Promise<ClaimedRow[]>,
  ): Promise<Port.ClaimedCommand[]> {
    const headSkip = this.headSkip;
    if (headSkip === null) return claimedRecords(await run(this.sql.claimDue, values), values);
    const types = values[1] as string[];
    const began = performance.now();
    const start = headSkip.startOf(types, began);
    const rows =
      start === null
        ? await run(this.sql.claimDue, values)
        : await run(this.sql.claimDueFrom, [...values, start.priority, start.dueAt.toISOString(), start.id]);
    const claimed = claimedRecords(rows, values);
    const ended = performance.now();
    headSkip.claimed(types, start, ended - began, claimed, ended);
    return claimed;
  }

  async claimById(v: CheckedClaimById): Promise<Port.ClaimedCommand | null> {
    const values = [v.id, v.now.toISOString(), v.token, v.leaseMs, v.types, v.instance];
    const limited = v.limitedTypes;
    if (limited.length > 0) {
      const [command] = (await this.connection.query<{ type: string }>(this.limitSql.typeOf, [v.id])).rows;
      if (command === undefined) return null;
      if (limited.includes(command.type)) {
        const [claimed] = await withinTypeLimit(this.connection, this.limitSql, command.type, 1, (tx) =>
          this.connection.queryIn<CommandRow>(tx, this.sql.claimById, values).then((r) => r.rows),
        );
        return claimed ? (toRecord(claimed) as Port.ClaimedCommand) : null;
      }
    }
    const [row] = await this.connection.hot<CommandRow>(this.sql.claimById, values);
    return row ? (toRecord(row) as Port.ClaimedCommand) : null;
  }

  async heartbeat(refs: readonly Port.ClaimRef[], leaseMs: number): Promise<Port.ClaimRef[]> {
    const [ids, tokens] = refArrays(refs);
    const rows = await this.fenced<{ id: string; claim_token: string }>(this.sql.heartbeat, [
      ids,
      tokens,
      leaseMs,
    ]);
    const held = new Set(rows.map((r) => `${r.id}:${r.claim_token}`));
    return refs.filter((r) => held.has(`${r.id}:${r.token}`)).map((r) => ({ id: r.id, token: r.token }));
  }

  async reportProgress(reports: readonly Port.ProgressReport[]): Promise<Port.CommandId[]> {
    const [ids, tokens] = refArrays(reports);
    const rows = await this.connection.hot<{ id: string }>(this.sql.reportProgress, [
      ids,
      tokens,
      reports.map((r) => String(r.done)),
      reports.map((r) => String(r.total)),
    ]);
    return inCallersOrder(
      ids,
      rows.map((r) => r.id),
    );
  }

  /**
   * The SUCCESS of attempts that shared `tx` (a store transaction), fenced, in the statements of
   * `complete`, run in `tx`.
   */
  private async completeAllIn(
    tx: Tx,
    checked: readonly CheckedCompletedAttempt[],
  ): Promise<Port.CommandId[]> {
    const done = await this.completeBy(
      (text, values) =>
        this.stalePlans.timed(checked.length, () =>
          this.connection.preparedIn<{ id: string }>(tx, text, values),
        ),
      checked,
    );
    return inCallersOrder(refArrays(checked)[0], done);
  }

  /**
   * The fenced SUCCESS of `checked` through `write`: the commonest statement (rows without
   * dependants move), then the settling one for the rows it left. The ids completed.
   */
  private async completeBy(
    write: (text: string, values: unknown[]) => Promise<{ id: string }[]>,
    checked: readonly CheckedCompletedAttempt[],
  ): Promise<Port.CommandId[]> {
    // The statement wrote nothing; the driver's text stays out of the error.
    const checkedWrite = (text: string, values: unknown[]): Promise<{ id: string }[]> =>
      write(text, values).catch((e: unknown) => {
        if ((e as { code?: unknown } | null)?.code === INVALID_TEXT_REPRESENTATION) {
          throw new InvalidArgumentError('a result must be JSON text');
        }
        throw e;
      });
    const [ids, tokens] = refArrays(checked);
    // Only attempts that left a result take the statement with the results' array: the commonest
    // write stays as it was.
    const withResults = checked.some((a) => a.resultJson !== undefined);
    const moved = withResults
      ? await checkedWrite(this.sql.completeWithResults, [
          ids,
          tokens,
          checked.map((a) => a.resultJson ?? null),
        ])
      : await checkedWrite(this.sql.complete, [ids, tokens]);
    const done = moved.map((r) => r.id);
    // A command with dependants settles them as it moves; a schedule's tick completes in place.
    const stayed = notAmong(checked, done);
    if (stayed.length > 0) {
      const [stayedIds, stayedTokens] = refArrays(stayed);
      const settled = await checkedWrite(this.sql.completeSettling, [
        stayedIds,
        stayedTokens,
        stayed.map((a) => a.resultJson ?? null),
      ]);
      done.push(...settled.map((r) => r.id));
    }
    return done;
  }

  async complete(checked: readonly CheckedCompletedAttempt[]): Promise<Port.CommandId[]> {
    const [ids, tokens] = refArrays(checked);
    const done = await this.completeBy((text, values) => this.fenced<{ id: string }>(text, values), checked);
    // A ref not completed now may have been by an earlier try whose reply was lost (a retry after a
    // cut connection): that is its own outcome recorded, not a fenced one.
    if (done.length < new Set(ids).size) {
      const before = await this.query<{ id: string }>(this.sql.completedBefore, [ids, tokens]);
      done.push(...before.map((r) => r.id));
    }
    return inCallersOrder(ids, done);
  }

  release(refs: readonly Port.ClaimRef[]): Promise<Port.CommandId[]> {
    return this.fencedBatch(this.sql.release, refs);
  }

  releaseRevoked(refs: readonly Port.ClaimRef[]): Promise<Port.CommandId[]> {
    return this.fencedBatch(this.sql.releaseRevoked, refs);
  }

  async fail(checked: readonly CheckedFailedAttempt[]): Promise<Port.CommandId[]> {
    const ids = checked.map((a) => a.id);
    const claims = [
      ids,
      checked.map((a) => a.token),
      checked.map((a) => a.status),
      checked.map((a) => a.retryCount),
    ];
    const done = (
      await this.fenced<{ id: string }>(this.sql.fail, [
        ...claims,
        checked.map((a) => a.nextRunAt.toISOString()),
        checked.map((a) => a.lastError),
      ])
    ).map((r) => r.id);
    // As for complete: an earlier try whose reply was lost may have written these outcomes.
    if (done.length < new Set(ids).size) {
      done.push(...(await this.query<{ id: string }>(this.sql.failedBefore, claims)).map((r) => r.id));
    }
    return inCallersOrder(ids, done);
  }

  async reclaimHung(reclaim: CheckedReclaim): Promise<Port.ReclaimedCommand[]> {
    const values: unknown[] = [reclaim.limit, reclaim.maxRescues, reclaim.deadError];
    const window = this.reclaimWindow;
    const startedAt = performance.now();
    const windowMs = window?.windowOf(startedAt) ?? null;
    const rows = await this.query<{ id: string; type: string; status: 'PENDING' | 'DEAD' }>(
      windowMs === null ? this.sql.reclaimHung : this.sql.reclaimHungWithin,
      windowMs === null ? values : [...values, windowMs],
    );
    window?.scanned(windowMs, startedAt, performance.now() - startedAt, rows.length, reclaim.limit);
    return rows
      .map((r) => ({ id: r.id, type: r.type, status: r.status }))
      .sort((a, b) => compareIds(a.id, b.id));
  }

  async retry(id: Port.CommandId, now: Date): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.admin('retry', id, this.sql.retry, [now.toISOString()]);
  }

  async requeue(id: Port.CommandId, now: Date): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    const at = now.toISOString();
    return this.admin('requeue', id, this.sql.requeue, [at, this.names.channel]);
  }

  async kill(
    id: Port.CommandId,
    reason: string | null,
  ): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.admin('kill', id, this.sql.dispose, [reason, this.names.channel]);
  }

  async cancel(
    id: Port.CommandId,
    reason: string | null,
  ): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.admin('cancel', id, this.sql.dispose, [reason, this.names.channel]);
  }

  async get(id: Port.CommandId): Promise<Port.CommandRecord | null> {
    // Prepared: with the history in partitions, planning the read of each one cost more than
    // running it (a status resource polled for a 202 reads this).
    const [row] = await this.connection.hot<CommandRow>(this.sql.get, [id]);
    return row ? toRecord(row) : null;
  }

  /** The commands that exist among `ids`, in the order asked for. */
  async getMany(wanted: readonly Port.CommandId[]): Promise<Port.CommandRecord[]> {
    const rows = await this.connection.hot<CommandRow>(this.sql.getMany, [[...new Set(wanted)]]);
    const byId = new Map(rows.map((r) => [r.id, toRecord(r)]));
    return wanted.flatMap((id) => byId.get(id) ?? []);
  }

  async list(q: CheckedListQuery): Promise<Port.ListPage> {
    const { limit, fetch, statuses, type, bizKey, after } = q;
    const rows = await this.query<CommandRow>(this.sql.list, [
      statuses,
      type,
      bizKey,
      after?.createdAt.toISOString() ?? null,
      after?.id ?? null,
      fetch,
    ]);
    return listPage(rows, limit, toRecord);
  }

  async stats(now: Date): Promise<Port.StoreStats> {
    const at = now.toISOString();
    const [counts, oldest] = await Promise.all([
      this.query<{ status: Port.CommandStatus; type: string; count: string }>(this.sql.counts, []),
      this.query<{ oldest: string | null }>(this.sql.oldestDue, [at]),
    ]);
    const first = oldest[0]?.oldest ?? null;
    return {
      counts: statsRowsFromRows(counts),
      oldestDueAt: first === null ? null : toDate(first),
    };
  }

  async healthProbe(params: Port.HealthProbeParams): Promise<Port.HealthProbe> {
    const { now, deadLetterLimit } = params;
    const [row] = await this.query<{ dead_letters: string; oldest: string | null }>(this.sql.healthProbe, [
      now.toISOString(),
      deadLetterLimit,
    ]);
    return {
      deadLetters: Number(row?.dead_letters ?? 0),
      oldestDueAt: row?.oldest == null ? null : toDate(row.oldest),
    };
  }

  async outcomeCounts(params: Port.OutcomeCountParams): Promise<Port.OutcomeCount[]> {
    const { from, to, latencyBoundsMs } = params;
    const rows = await this.query<OutcomeCountRow>(this.sql.outcomeCounts, [
      from.toISOString(),
      to.toISOString(),
      latencyBoundsMs,
    ]);
    return outcomeCountsFromRows(rows);
  }

  async purge(purge: CheckedPurge): Promise<number> {
    const purgeFrom = async (text: string, limit: number): Promise<number> =>
      Number(
        (
          await this.connection.query<{ purged: number }>(text, [
            purge.statuses,
            purge.olderThan.toISOString(),
            limit,
          ])
        ).rows[0]?.purged ?? 0,
      );
    // The history holds most finished commands (SUCCESS only); the command table the few that stay
    // (history.ts). A purge of other statuses never reads the history. Its partitions past the
    // cutoff go whole, its others row by row, then the history before its partitions.
    let purged = 0;
    for (const step of [
      () => this.historyPartitions.maintain(purge.olderThan),
      (left: number) => purgeFrom(this.sql.purgeHistory, left),
      (left: number) => purgeFrom(this.sql.purgeHistoryV1, left),
    ]) {
      if (!purge.statuses.includes('SUCCESS')) break;
      purged += await step(purge.limit - purged);
      if (purged >= purge.limit) return purged;
    }
    return purged + (await purgeFrom(this.sql.purge, purge.limit - purged));
  }

  async now(): Promise<Date> {
    const [row] = await this.query<{ now: string }>(this.sql.now, []);
    if (!row) throw new Error('PostgreSQL returned no time');
    return toDate(row.now);
  }

  async ping(): Promise<void> {
    await this.connection.query(this.sql.ping);
  }

  /** Stops wake-ups, then closes the connection (what it opened). Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.wakeups.close();
      await this.connection.close();
    })();
    return this.closing;
  }

  /** A fenced write by id (its first value the ids) on the hot path, watched for a stale plan. */
  private fenced<R>(text: string, values: readonly unknown[]): Promise<R[]> {
    const rows = Array.isArray(values[0]) ? values[0].length : 1;
    return this.stalePlans.timed(rows, () => this.connection.hot<R>(text, values));
  }

  private async fencedBatch(text: string, refs: readonly Port.ClaimRef[]): Promise<Port.CommandId[]> {
    const [ids, tokens] = refArrays(refs);
    const rows = await this.fenced<{ id: string }>(text, [ids, tokens]);
    return inCallersOrder(
      ids,
      rows.map((r) => r.id),
    );
  }

  /**
   * One guarded UPDATE (`WHERE id = $1 AND status = ANY(sources)`); when it matches nothing, the row's
   * status says why (core guardedTransition).
   */
  private async admin(
    transition: Port.AdminTransition,
    id: Port.CommandId,
    text: string,
    extra: readonly unknown[],
  ): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    const values = [id, TRANSITION_SOURCES[transition], ...extra];
    return guardedTransition(transition, id, async () => {
      let rows: CommandRow[];
      try {
        rows = await this.query<CommandRow>(text, values);
      } catch (err) {
        if (!this.isActiveKeyViolation(err)) throw err;
        const [holder] = await this.query<{ id: string }>(this.sql.keyHolder, [id]);
        return keyHeldBy(id, holder?.id ?? null);
      }
      const [row] = rows;
      if (row) return { applied: toRecord(row) };
      const [current] = await this.query<{ status: Port.CommandStatus }>(this.sql.statusOf, [id]);
      return { unmatched: current?.status ?? null };
    });
  }

  private isActiveKeyViolation(err: unknown): boolean {
    const e = err as { code?: unknown; constraint?: unknown } | null;
    return e?.code === UNIQUE_VIOLATION && e.constraint === this.sql.activeKeyIndex;
  }

  private async query<R extends object>(text: string, values: readonly unknown[]): Promise<R[]> {
    return (await this.connection.query<R>(text, values)).rows;
  }
}

/** The store on a PostgreSQL engine: core's checkedStore in front of it, and `extra` beside. */
export function postgresEngineStore<Tx, Engine extends PostgresEngine<Tx>, Extra extends object>(
  engine: Engine,
  maxPayloadBytes: number | undefined,
  extra: Extra,
): CheckedStore<Tx, Engine> & Extra {
  return checkedStore<Tx, Engine, Extra>(engine, { maxPayloadBytes }, extra);
}

/**
 * claimDue's rows as the commands claimed, in claim order (RETURNING has none; the port promises
 * it). `values` are claimDue's: now, types, limit, token, lease ms, instance.
 */
export function claimedRecords(rows: ClaimedRow[], values: readonly unknown[]): Port.ClaimedCommand[] {
  const token = values[3] as string;
  const instance = values[5] as string | null;
  return rows.map((row) => claimedRecord(row, token, instance)).sort(byClaimOrder) as Port.ClaimedCommand[];
}

/** Parallel arrays of ids and tokens for the fenced batch statements. */
/** The attempts whose ids are not among `done`. */
function notAmong<A extends { readonly id: Port.CommandId }>(
  attempts: readonly A[],
  done: readonly string[],
): A[] {
  const landed = new Set(done);
  return attempts.filter((a) => !landed.has(a.id));
}

function refArrays(refs: readonly Port.ClaimRef[]): [Port.CommandId[], string[]] {
  return [refs.map((r) => r.id), refs.map((r) => r.token)];
}

/** Commands as the parallel arrays of the batch insert statements' parameters. */
function columnArrays(values: readonly CheckedCommand[]): unknown[][] {
  return [
    values.map((v) => v.type),
    values.map((v) => v.bizKey),
    values.map((v) => v.payloadJson),
    values.map((v) => v.maxRetry),
    values.map((v) => v.runAt?.toISOString() ?? null),
    values.map((v) => v.owner),
    values.map((v) => v.headersJson),
    values.map((v) => v.priority),
    values.map((v) => v.orderingKey),
  ];
}
