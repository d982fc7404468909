import { createHash } from 'node:crypto';
import type * as E from 'fp-ts/lib/Either.js';
import {
  InvalidArgumentError,
  isSqlExecutor,
  optionalInstance,
  requireId,
  requireInt,
  requireToken,
  requireTypes,
  TRANSITION_SOURCES,
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
  statsRowsFromRows,
  StoreInput,
  typePauseStore,
} from '@asynccmd/core/store-kit';
import type { CheckedCommand, OutcomeCountRow } from '@asynccmd/core/store-kit';
import type * as Port from '@asynccmd/core';
import type { ClientBase, Pool, PoolClient, QueryResultRow } from 'pg';
import { requireInstant } from './checks.js';
import {
  insertIdempotentThroughExecutor,
  insertEachThroughExecutor,
  insertThroughExecutor,
} from './executor-insert.js';
import { appliedVersions, migrate, migrationScript } from './migrations.js';
import { PostgresScheduleStore } from './schedules.js';
import { postgresTypeLimitStore, typeLimitSql, withinTypeLimit } from './type-limits.js';
import type { TableNames } from './names.js';
import { arrayLiteral, asText, FAST_COMMIT_STEP, HotStatements } from './pipeline/hot-statements.js';
import { IdReserve } from './pipeline/id-reserve.js';
import { throughTransactionPooler } from './pipeline/transaction-statements.js';
import { claimedRecord, RAW_TYPES, rowParams, toDate, toRecord } from './rows.js';
import type { ClaimedRow, CommandRow } from './rows.js';
import { buildSql } from './sql.js';
import type { Sql } from './sql.js';
import { CommitRiders } from './pipeline/commit-riders.js';
import { rolledBackIfAborted } from './pipeline/commit.js';
import { runInTransaction } from './pipeline/transaction.js';
import type { PostgresWakeups } from './wakeups.js';

export interface PostgresCommandStoreParts {
  readonly pool: Pool;
  /**
   * Where the store's own hot-path writes run (claims, heartbeats, outcomes); default `pool`.
   * createPostgresStore gives it `synchronous_commit = off` unless `durableClaims` is set.
   */
  readonly hotPool?: Pool;
  /** Whether close() ends the pool (false for a pool the application passed in). */
  readonly ownsPool: boolean;
  readonly names: TableNames;
  readonly wakeups: PostgresWakeups;
  readonly logger: Port.Logger;
  readonly maxPayloadBytes?: number;
  /**
   * The pools reach PostgreSQL through a transaction pooler (PgBouncer `pool_mode = transaction`):
   * no named prepared statements, and the hot path's `synchronous_commit = off` (when `hotPool` is
   * not `pool`) set in each of its transactions instead of at connection start-up. Default false.
   */
  readonly transactionPooler?: boolean;
}

type Queryable = Pick<ClientBase, 'query'> | Pool;

const UNIQUE_VIOLATION = '23505';
/** What the json cast answers for text that is not JSON (here: only a result can be). */
const INVALID_TEXT_REPRESENTATION = '22P02';
/**
 * Ids taken ahead per refill (IdReserve): a refill is one round trip per half a block of
 * submits in store transactions; an unused block is at most this many gaps in the sequence.
 */
const ID_BLOCK = 128;

/**
 * The store port on PostgreSQL (see core `CommandStore` for each operation's contract). Submits run
 * on the caller's client inside the caller's transaction; everything else is one statement in
 * autocommit: claims, heartbeats and outcomes on `hotPool` (the claim that follows a notification
 * on the LISTEN connection), the rest on `pool`.
 */
export class PostgresCommandStore implements Port.CommandStore<PoolClient> {
  readonly dialect = 'postgres';
  readonly capabilities: Port.StoreCapabilities<ClientBase>;
  readonly wakeups: PostgresWakeups;
  /**
   * Requeues and kills of running commands, heard on the LISTEN connection the wake-ups use;
   * absent when there is none (a transaction pooler and no `listenConnection`).
   */
  readonly revocations?: Port.RevocationChannel;
  readonly pool: Pool;
  /** The pool of claims, heartbeats and outcomes: losing one of those only runs a command again. */
  readonly hotPool: Pool;
  private readonly sql: Sql;
  private readonly names: TableNames;
  private readonly ownsPool: boolean;
  private readonly input: StoreInput;
  private closing: Promise<void> | null = null;
  private readonly onIdleError: (err: Error) => void;
  /** Hot-path statement text → its prepared name, hashed once per statement. */
  private readonly preparedNames = new Map<string, string>();
  private readonly riders: CommitRiders;
  private readonly insertOneInBatch: { readonly name?: string; readonly text: string };
  private readonly insertWithId: { readonly name?: string; readonly text: string };
  private readonly ids: IdReserve;
  private readonly hotStatements: HotStatements;
  /** Named prepared statements may be used on the pools (false through a transaction pooler). */
  private readonly named: boolean;
  readonly schedules: PostgresScheduleStore;
  readonly typeLimits: Port.TypeLimitStore;
  readonly typePauses: Port.TypePauseStore = typePauseStore({
    insert: async (type, reason) =>
      (await this.pool.query(this.sql.typePause, [type, reason])).rowCount === 1,
    remove: async (type) => (await this.pool.query(this.sql.typeResume, [type])).rowCount === 1,
    read: async () =>
      (
        await this.query<{ type: string; paused_at: string; reason: string | null }>(
          this.pool,
          this.sql.typePauseList,
          [],
        )
      ).map((r) => ({ type: r.type, pausedAt: toDate(r.paused_at), reason: r.reason })),
  });
  private readonly limitSql: ReturnType<typeof typeLimitSql>;

  constructor(parts: PostgresCommandStoreParts) {
    this.pool = parts.pool;
    this.hotPool = parts.hotPool ?? parts.pool;
    this.ownsPool = parts.ownsPool;
    this.names = parts.names;
    this.wakeups = parts.wakeups;
    this.named = parts.transactionPooler !== true;
    if (!this.named) for (const pool of this.pools()) throughTransactionPooler(pool);
    const delivers = this.wakeups.delivers;
    if (delivers) {
      this.revocations = { subscribe: (onRevoked) => this.wakeups.subscribeRevocations(onRevoked) };
    }
    this.capabilities = {
      skipLocked: true,
      wakeups: delivers,
      revocations: delivers,
      sqlExecutor: true,
      // The claim and the NOTIFY pipelined behind a store transaction's COMMIT (pipeline/README.md).
      commitRiding: {
        claimById: (tx, p) => this.claimByIdOnCommit(tx, p),
        notify: (tx) => this.wakeups.notifyOnCommit(tx),
      },
    };
    this.input = new StoreInput({ maxPayloadBytes: parts.maxPayloadBytes });
    this.sql = buildSql(parts.names);
    this.schedules = new PostgresScheduleStore(this.pool, parts.names, this.input);
    this.limitSql = typeLimitSql(parts.names, parts.names.table);
    this.typeLimits = postgresTypeLimitStore(this.pool, this.limitSql);
    // On a durable hot path the claim after COMMIT stays durable too. Its text (so its prepared
    // name) differs from claimById's either way: pipeline/commit.ts and pg's own queries never share a name.
    const claimAfterCommit =
      this.hotPool === this.pool ? `${this.sql.claimById}\n-- after COMMIT` : this.sql.claimByIdAfterCommit;
    // A text (so a prepared name) of its own, never used by pg's own queries (see pipeline/batch.ts).
    const insertOneInBatch = `${this.sql.insertOne}\n-- in a batch`;
    this.insertOneInBatch = this.batchStatement(insertOneInBatch);
    this.insertWithId = this.batchStatement(this.sql.insertOneWithId);
    this.hotStatements = new HotStatements(
      this.hotPool,
      (statement) => this.prepared(this.hotPool, statement.text, statement.values),
      parts.logger,
      // Through a pooler the fast commit is asked for in each transaction (see index.ts SESSION_OPTIONS).
      this.named ? null : { prefix: this.hotPool === this.pool ? [] : [FAST_COMMIT_STEP] },
    );
    this.ids = new IdReserve(this.pool, this.sql.takeIds, parts.names.table, ID_BLOCK, parts.logger);
    this.riders = new CommitRiders(this.wakeups, this.batchStatement(claimAfterCommit), parts.logger);
    // pg emits 'error' on an idle pooled client whose server connection dies (restart,
    // pg_terminate_backend, network); unheard, it would crash the process. The pool has already
    // dropped that client, and the next query opens a fresh one.
    this.onIdleError = (err) => parts.logger.warn({ err }, 'asynccmd: idle PostgreSQL connection lost');
    for (const pool of this.pools()) pool.on('error', this.onIdleError);
  }

  /** The schema-qualified, quoted table name, e.g. `"public"."async_command"`. */
  get table(): string {
    return this.names.table;
  }

  migrate(): Promise<void> {
    return migrate(this.pool, this.names, { maxPayloadBytes: this.input.maxPayloadBytes });
  }

  async migrationScript(options: Port.MigrationScriptOptions = {}): Promise<Port.MigrationScript> {
    const applied = options.all === true ? new Set<number>() : await appliedVersions(this.pool, this.names);
    return migrationScript(this.names, applied, { maxPayloadBytes: this.input.maxPayloadBytes });
  }

  transaction<T>(fn: (tx: PoolClient) => Promise<T>): Promise<T> {
    return runInTransaction(this.pool, fn, this.riders);
  }

  async insert(
    tx: ClientBase | Port.SqlExecutor,
    commands: readonly Port.NewCommand[],
  ): Promise<Port.CommandId[]> {
    const values = this.input.commands(commands);
    if (values.length === 0) return [];
    if (values.some((v) => v.orderingKey !== null)) {
      // Never an id taken ahead: a keyed command's id is drawn under its key's lock (sql.ts insertKeyed).
      if (isSqlExecutor(tx))
        return insertEachThroughExecutor(tx, this.sql.insertOneKeyed, values.map(rowParams));
      const params = columnArrays(values);
      return (await this.prepared<{ id: string }>(tx, this.sql.insertKeyed, params)).map((r) => r.id);
    }
    if (isSqlExecutor(tx)) return insertThroughExecutor(tx, this.sql.insertOne, values.map(rowParams));
    if (values.length === 1) {
      const params = rowParams(values[0]!);
      const deferred = this.riders.deferred(tx);
      if (deferred) {
        // A store transaction: with its id known ahead, the INSERT waits to go out with the
        // transaction's next statement or its COMMIT.
        const id = this.ids.take();
        if (id !== null) {
          deferred.hold({ ...this.insertWithId, values: [id, ...params.map(asText)] });
          return [id];
        }
        // No id at hand yet: the INSERT goes out now, with BEGIN and anything held, in one batch.
        const [row] = await deferred.run({ ...this.insertOneInBatch, values: params.map(asText) });
        if (typeof row?.id !== 'string') throw new Error('the insert returned no id');
        return [row.id];
      }
      return (await this.prepared<{ id: string }>(tx, this.sql.insertOne, params)).map((r) => r.id);
    }
    const rows = await this.prepared<{ id: string }>(tx, this.sql.insert, columnArrays(values));
    return rows.map((r) => r.id);
  }

  async insertIdempotent(
    tx: ClientBase | Port.SqlExecutor,
    command: Port.NewCommand & { readonly bizKey: string },
    options?: Port.IdempotentInsertOptions,
  ): Promise<Port.InsertResult> {
    const checked = this.input.idempotentCommand(command);
    const onPending = this.input.onPending(options);
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
      const [row] = await this.prepared<{ id: string; duplicate: string; replaced?: string }>(
        tx,
        statement,
        params,
      );
      // Nothing back: the key's holder committed after this statement began, or finished since.
      return row ? { id: row.id, duplicate: row.duplicate === 't', replaced: row.replaced === 't' } : null;
    });
  }

  async claimDue(p: Port.ClaimDueParams): Promise<Port.ClaimedCommand[]> {
    const limit = requireInt('limit', p.limit, 0);
    const types = requireTypes(p.types);
    const values = [
      requireInstant('now', p.now),
      types,
      limit,
      requireToken(p.token),
      requireLease(p.leaseMs),
      optionalInstance(p.instance),
    ];
    if (limit === 0 || types.length === 0) return [];
    if (p.limitedTypes === undefined || p.limitedTypes.length === 0) return this.claimUnlimited(values);
    return claimWithinLimits(types, p.limitedTypes, limit, {
      claimLimited: (type, max) =>
        withinTypeLimit(this.pool, this.limitSql, type, max, async (client, free) => {
          const claimed = await client.query<ClaimedRow>({
            text: this.sql.claimDue,
            types: RAW_TYPES,
            values: [values[0], [type], free, ...values.slice(3)],
          });
          return claimedRecords(claimed.rows, values);
        }),
      claimOthers: (others, max) => this.claimUnlimited([values[0], others, max, ...values.slice(3)]),
    });
  }

  /** claimDue's values: now, types, limit, token, lease ms, instance. */
  private async claimUnlimited(values: unknown[]): Promise<Port.ClaimedCommand[]> {
    // The claim that follows a notification runs on the LISTEN connection that just delivered it.
    // That connection is always a direct one: its statements may be prepared.
    const lent = this.wakeups.lendAfterWake((on) =>
      this.prepared<ClaimedRow>(on, this.sql.claimDue, values, true),
    );
    return claimedRecords(await (lent ?? this.hot<ClaimedRow>(this.sql.claimDue, values)), values);
  }

  async claimById(p: Port.ClaimByIdParams): Promise<Port.ClaimedCommand | null> {
    const v = claimByIdValues(p);
    if (v === null) return null;
    const values = [v.id, v.now, v.token, v.leaseMs, v.types, v.instance];
    const limited = p.limitedTypes === undefined ? [] : requireTypes(p.limitedTypes);
    if (limited.length > 0) {
      const [command] = (await this.pool.query<{ type: string }>(this.limitSql.typeOf, [v.id])).rows;
      if (command === undefined) return null;
      if (limited.includes(command.type)) {
        const [claimed] = await withinTypeLimit(this.pool, this.limitSql, command.type, 1, (client) =>
          client
            .query<CommandRow>({ text: this.sql.claimById, values, types: RAW_TYPES })
            .then((r) => r.rows),
        );
        return claimed ? (toRecord(claimed) as Port.ClaimedCommand) : null;
      }
    }
    const [row] = await this.hot<CommandRow>(this.sql.claimById, values);
    return row ? (toRecord(row) as Port.ClaimedCommand) : null;
  }

  /**
   * claimById run right after `tx` commits, in the same round trip as its COMMIT (pipeline/commit-riders.ts);
   * null when `tx` is not an open transaction of this store's transaction() or already has one.
   */
  claimByIdOnCommit(tx: ClientBase, p: Port.ClaimByIdParams): Promise<Port.ClaimedCommand | null> | null {
    // A claim within type limits takes a transaction of its own: claimById after commit does it.
    if (p.limitedTypes !== undefined && p.limitedTypes.length > 0) return null;
    const v = claimByIdValues(p);
    // No types to claim: settled at once, like claimById's null.
    if (v === null) return Promise.resolve(null);
    const types = v.types === null ? null : arrayLiteral(v.types);
    const claimed = this.riders.claimOnCommit(tx, [
      v.id,
      v.now,
      v.token,
      String(v.leaseMs),
      types,
      v.instance,
    ]);
    return claimed && claimed.then((row) => (row ? (toRecord(row) as Port.ClaimedCommand) : null));
  }

  async heartbeat(refs: readonly Port.ClaimRef[], leaseMs: number): Promise<Port.ClaimRef[]> {
    const lease = this.input.leaseMs(leaseMs);
    const [ids, tokens] = refArrays(this.input.refs(refs));
    if (ids.length === 0) return [];
    const rows = await this.hot<{ id: string; claim_token: string }>(this.sql.heartbeat, [
      ids,
      tokens,
      lease,
    ]);
    const held = new Set(rows.map((r) => `${r.id}:${r.claim_token}`));
    return refs.filter((r) => held.has(`${r.id}:${r.token}`)).map((r) => ({ id: r.id, token: r.token }));
  }

  async complete(attempts: readonly Port.CompletedAttempt[]): Promise<Port.CommandId[]> {
    const checked = this.input.completedAttempts(attempts);
    const [ids, tokens] = refArrays(checked);
    if (ids.length === 0) return [];
    // Only attempts that left a result take the statement with the results' array: the commonest
    // write stays as it was.
    const withResults = checked.some((a) => a.resultJson !== undefined);
    const written = withResults
      ? this.hot<{ id: string }>(this.sql.completeWithResults, [
          ids,
          tokens,
          checked.map((a) => a.resultJson ?? null),
        ]).catch((e: unknown) => {
          // The statement wrote nothing; the driver's text stays out of the error.
          if ((e as { code?: unknown } | null)?.code === INVALID_TEXT_REPRESENTATION) {
            throw new InvalidArgumentError('a result must be JSON text');
          }
          throw e;
        })
      : this.hot<{ id: string }>(this.sql.complete, [ids, tokens]);
    const done = (await written).map((r) => r.id);
    // A ref not completed now may have been by an earlier try whose reply was lost (a retry after a
    // cut connection): that is its own outcome recorded, not a fenced one.
    if (done.length < new Set(ids).size) {
      const before = await this.query<{ id: string }>(this.pool, this.sql.completedBefore, [ids, tokens]);
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

  async fail(attempts: readonly Port.FailedAttempt[]): Promise<Port.CommandId[]> {
    const checked = this.input.failedAttempts(attempts);
    if (checked.length === 0) return [];
    const ids = checked.map((a) => a.id);
    const claims = [
      ids,
      checked.map((a) => a.token),
      checked.map((a) => a.status),
      checked.map((a) => a.retryCount),
    ];
    const done = (
      await this.hot<{ id: string }>(this.sql.fail, [
        ...claims,
        checked.map((a) => a.nextRunAt.toISOString()),
        checked.map((a) => a.lastError),
      ])
    ).map((r) => r.id);
    // As for complete: an earlier try whose reply was lost may have written these outcomes.
    if (done.length < new Set(ids).size) {
      done.push(
        ...(await this.query<{ id: string }>(this.pool, this.sql.failedBefore, claims)).map((r) => r.id),
      );
    }
    return inCallersOrder(ids, done);
  }

  async reclaimHung(p: Port.ReclaimParams): Promise<Port.ReclaimedCommand[]> {
    const reclaim = this.input.reclaim(p);
    if (reclaim === null) return [];
    const rows = await this.query<{ id: string; type: string; status: 'PENDING' | 'DEAD' }>(
      this.pool,
      this.sql.reclaimHung,
      [reclaim.limit, reclaim.maxRescues, reclaim.deadError],
    );
    return rows
      .map((r) => ({ id: r.id, type: r.type, status: r.status }))
      .sort((a, b) => compareIds(a.id, b.id));
  }

  async retry(id: Port.CommandId, now: Date): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.admin('retry', id, this.sql.retry, [this.input.adminNow(now).toISOString()]);
  }

  async requeue(id: Port.CommandId, now: Date): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    const at = this.input.adminNow(now).toISOString();
    return this.admin('requeue', id, this.sql.requeue, [at, this.names.channel]);
  }

  async kill(id: Port.CommandId, reason?: string): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.admin('kill', id, this.sql.dispose, [this.input.reason(reason), this.names.channel]);
  }

  async cancel(id: Port.CommandId, reason?: string): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    return this.admin('cancel', id, this.sql.dispose, [this.input.reason(reason), this.names.channel]);
  }

  async get(id: Port.CommandId): Promise<Port.CommandRecord | null> {
    const [row] = await this.query<CommandRow>(this.pool, this.sql.get, [this.input.id(id)]);
    return row ? toRecord(row) : null;
  }

  /** The commands that exist among `ids`, in the order asked for. */
  async getMany(ids: readonly Port.CommandId[]): Promise<Port.CommandRecord[]> {
    const wanted = this.input.ids(ids);
    if (wanted.length === 0) return [];
    const rows = await this.query<CommandRow>(this.pool, this.sql.getMany, [[...new Set(wanted)]]);
    const byId = new Map(rows.map((r) => [r.id, toRecord(r)]));
    return wanted.flatMap((id) => byId.get(id) ?? []);
  }

  async list(q: Port.ListQuery): Promise<Port.ListPage> {
    const { limit, fetch, statuses, type, bizKey, after } = this.input.list(q);
    const rows = await this.query<CommandRow>(this.pool, this.sql.list, [
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
    const at = this.input.instant('now', now).toISOString();
    const [counts, oldest] = await Promise.all([
      this.query<{ status: Port.CommandStatus; type: string; count: string }>(this.pool, this.sql.counts, []),
      this.query<{ oldest: string | null }>(this.pool, this.sql.oldestDue, [at]),
    ]);
    const first = oldest[0]?.oldest ?? null;
    return {
      counts: statsRowsFromRows(counts),
      oldestDueAt: first === null ? null : toDate(first),
    };
  }

  async healthProbe(params: Port.HealthProbeParams): Promise<Port.HealthProbe> {
    const { now, deadLetterLimit } = this.input.healthProbe(params);
    const [row] = await this.query<{ dead_letters: string; oldest: string | null }>(
      this.pool,
      this.sql.healthProbe,
      [this.input.instant('now', now).toISOString(), deadLetterLimit],
    );
    return {
      deadLetters: Number(row?.dead_letters ?? 0),
      oldestDueAt: row?.oldest == null ? null : toDate(row.oldest),
    };
  }

  async outcomeCounts(params: Port.OutcomeCountParams): Promise<Port.OutcomeCount[]> {
    const { from, to, latencyBoundsMs } = this.input.outcomeCounts(params);
    const rows = await this.query<OutcomeCountRow>(this.pool, this.sql.outcomeCounts, [
      from.toISOString(),
      to.toISOString(),
      latencyBoundsMs,
    ]);
    return outcomeCountsFromRows(rows);
  }

  async purge(p: Port.PurgeParams): Promise<number> {
    const purge = this.input.purge(p);
    if (purge === null) return 0;
    const result = await this.pool.query({
      text: this.sql.purge,
      values: [purge.statuses, purge.olderThan.toISOString(), purge.limit],
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
      await Promise.all([this.wakeups.close(), this.ids.close()]);
      for (const pool of this.pools()) {
        if (this.ownsPool) await pool.end();
        else pool.removeListener('error', this.onIdleError);
      }
    })();
    return this.closing;
  }

  /** The store's pools, each once. */
  private pools(): Pool[] {
    return this.hotPool === this.pool ? [this.pool] : [this.pool, this.hotPool];
  }

  private async fencedBatch(text: string, refs: readonly Port.ClaimRef[]): Promise<Port.CommandId[]> {
    const [ids, tokens] = refArrays(this.input.refs(refs));
    if (ids.length === 0) return [];
    const rows = await this.hot<{ id: string }>(text, [ids, tokens]);
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
    rawId: Port.CommandId,
    text: string,
    extra: readonly unknown[],
  ): Promise<E.Either<Port.AdminError, Port.CommandRecord>> {
    const id = this.input.id(rawId);
    const values = [id, TRANSITION_SOURCES[transition], ...extra];
    return guardedTransition(transition, id, async () => {
      let rows: CommandRow[];
      try {
        rows = await this.query<CommandRow>(this.pool, text, values);
      } catch (err) {
        if (!this.isActiveKeyViolation(err)) throw err;
        const [holder] = await this.query<{ id: string }>(this.pool, this.sql.keyHolder, [id]);
        return keyHeldBy(id, holder?.id ?? null);
      }
      const [row] = rows;
      if (row) return { applied: toRecord(row) };
      const [current] = await this.query<{ status: Port.CommandStatus }>(this.pool, this.sql.statusOf, [id]);
      return { unmatched: current?.status ?? null };
    });
  }

  private isActiveKeyViolation(err: unknown): boolean {
    const e = err as { code?: unknown; constraint?: unknown } | null;
    return e?.code === UNIQUE_VIOLATION && e.constraint === this.sql.activeKeyIndex;
  }

  /**
   * A hot-path statement on `hotPool`, as a named prepared statement (each connection parses and
   * plans it once instead of on every claim and outcome), sent together with the others asked for
   * in the same turn (pipeline/hot-statements.ts).
   */
  private hot<R extends QueryResultRow>(text: string, values: readonly unknown[]): Promise<R[]> {
    return this.hotStatements.run<R>({ name: this.preparedName(text), text, values });
  }

  /**
   * A statement as a named prepared statement on `on`'s connection: submits (on the caller's
   * transaction) and the hot path run so often that planning each time would cost more than
   * running them (measured: a single submit's INSERT, 8 clients, ~4,000/s planned every time
   * against ~6,500/s prepared).
   */
  private async prepared<R extends QueryResultRow>(
    on: Queryable,
    text: string,
    values: readonly unknown[],
    named = this.named,
  ): Promise<R[]> {
    const query = named
      ? { name: this.preparedName(text), text, values: [...values], types: RAW_TYPES }
      : { text, values: [...values], types: RAW_TYPES };
    const result = await on.query<R>(query).catch((e: unknown) => {
      // A submit in the caller's transaction after a statement of theirs failed there.
      throw rolledBackIfAborted(e);
    });
    return result.rows;
  }

  /** A statement a batch sends: prepared under its name, unless named statements are off. */
  private batchStatement(text: string): { readonly name?: string; readonly text: string } {
    return this.named ? { name: this.preparedName(text), text } : { text };
  }

  private preparedName(text: string): string {
    let name = this.preparedNames.get(text);
    if (name === undefined) {
      name = preparedName(text);
      this.preparedNames.set(text, name);
    }
    return name;
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

/**
 * A statement's prepared name, from a hash of its text: two stores on one pool (other schema or
 * table) never give one name to two different statements.
 */
function preparedName(text: string): string {
  return `asynccmd_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
}

/**
 * claimDue's rows as the commands claimed, in claim order (RETURNING has none; the port promises
 * it). `values` are claimDue's: now, types, limit, token, lease ms, instance.
 */
function claimedRecords(rows: ClaimedRow[], values: readonly unknown[]): Port.ClaimedCommand[] {
  const token = values[3] as string;
  const instance = values[5] as string | null;
  return rows.map((row) => claimedRecord(row, token, instance)).sort(byClaimOrder) as Port.ClaimedCommand[];
}

/** Parallel arrays of ids and tokens for the fenced batch statements. */
function refArrays(refs: readonly Port.ClaimRef[]): [Port.CommandId[], string[]] {
  return [refs.map((r) => r.id), refs.map((r) => r.token)];
}

/** claimById's checked values, or null when `types` is given and empty (nothing can be claimed). */
function claimByIdValues(p: Port.ClaimByIdParams): {
  id: string;
  now: string;
  token: string;
  leaseMs: number;
  types: string[] | null;
  instance: string | null;
} | null {
  const types = p.types === undefined ? null : requireTypes(p.types);
  const values = {
    id: requireId(p.id),
    now: requireInstant('now', p.now),
    token: requireToken(p.token),
    leaseMs: requireLease(p.leaseMs),
    types,
    instance: optionalInstance(p.instance),
  };
  return types !== null && types.length === 0 ? null : values;
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

/** A lease of at least a millisecond: a zero lease would be hung before it was handed out. */
function requireLease(leaseMs: unknown): number {
  return requireInt('leaseMs', leaseMs, 1);
}
