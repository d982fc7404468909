import { isSqlExecutor } from '@asynccmd/core';
import type { HeadSkipSettings } from '@asynccmd/core/store-kit';
import type * as Port from '@asynccmd/core';
import type {
  CheckedClaimById,
  CheckedCompletedAttempt,
  TransactionalCompletionEngine,
} from '@asynccmd/core/store-kit';
import { CLAIM_LOST } from './dependencies.js';
import type { EventEmitter } from 'node:events';
import type { ClientBase, Pool, PoolClient } from 'pg';
import { arrayLiteral, asText } from './connection.js';
import type { TableNames } from './names.js';
import { PgConnection } from './pg-connection.js';
import { CommitRiders } from './pipeline/commit-riders.js';
import { IdReserve } from './pipeline/id-reserve.js';
import { runInTransaction, transactionStatus } from './pipeline/transaction.js';
import { toRecord } from './rows.js';
import type { ClaimedRow } from './rows.js';
import { PostgresEngine, postgresEngineStore } from './store.js';
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
  /** Claims past a slow head (core store-kit head-skip.ts); null: always from the head. Default its defaults. */
  readonly headSkip?: HeadSkipSettings | null;
  /** Largest payload accepted; migrations write it into the SQL submit functions' check too. */
  readonly maxPayloadBytes?: number;
  /**
   * The pools reach PostgreSQL through a transaction pooler (PgBouncer `pool_mode = transaction`):
   * no named prepared statements, and the hot path's `synchronous_commit = off` (when `hotPool` is
   * not `pool`) set in each of its transactions instead of at connection start-up. Default false.
   */
  readonly transactionPooler?: boolean;
}

/** The store port on PostgreSQL, with its pools, table and wake-ups. */
export type PostgresCommandStore = Port.CommandStore<PoolClient> &
  Required<Pick<Port.CommandStore<PoolClient>, 'migrationScript' | 'cleanupHorizon'>> & {
    readonly wakeups: PostgresWakeups;
    readonly pool: Pool;
    /** The pool of claims, heartbeats and outcomes. */
    readonly hotPool: Pool;
    /** The schema-qualified, quoted table name, e.g. `"public"."async_command"`. */
    readonly table: string;
    /** `capabilities.commitRiding.claimById`. */
    claimByIdOnCommit(
      tx: ClientBase,
      params: Port.ClaimByIdParams,
    ): Promise<Port.ClaimedCommand | null> | null;
  };

/** The checked store over the PostgreSQL engine on pg. */
export function postgresStore(parts: PostgresCommandStoreParts): PostgresCommandStore {
  const engine = new PgEngine(parts);
  const extra = {
    wakeups: engine.wakeups,
    pool: engine.pool,
    hotPool: engine.hotPool,
    table: engine.table,
    claimByIdOnCommit: (tx: PoolClient, params: Port.ClaimByIdParams) =>
      store.capabilities.commitRiding?.claimById(tx, params) ?? null,
  };
  const store = postgresEngineStore<PoolClient, PgEngine, typeof extra>(engine, parts.maxPayloadBytes, extra);
  return store;
}

/**
 * Ids taken ahead per refill (IdReserve): a refill is one round trip per half a block of
 * submits in store transactions; an unused block is at most this many gaps in the sequence.
 */
const ID_BLOCK = 128;

/**
 * The PostgreSQL engine on pg's pools, with what only pg's wire access allows (pipeline/README.md):
 * a store transaction's statements held back and sent with its COMMIT, a single-row submit's id
 * taken ahead, the claim and the NOTIFY riding on the COMMIT, the claim after a wake-up on the
 * LISTEN connection that delivered it.
 */
export class PgEngine extends PostgresEngine<PoolClient> {
  declare readonly wakeups: PostgresWakeups;
  declare readonly cleanupHorizon: Port.CleanupHorizonProbe;
  readonly pool: Pool;
  /** The pool of claims, heartbeats and outcomes: losing one of those only runs a command again. */
  readonly hotPool: Pool;
  private readonly pg: PgConnection;
  private readonly riders: CommitRiders;
  private readonly insertOneInBatch: { readonly name?: string; readonly text: string };
  private readonly insertWithId: { readonly name?: string; readonly text: string };
  private readonly completeAtCommit: { readonly name?: string; readonly text: string };
  private readonly ids: IdReserve;

  constructor(parts: PostgresCommandStoreParts) {
    const pg = new PgConnection(parts);
    super({
      connection: pg,
      names: parts.names,
      wakeups: parts.wakeups,
      maxPayloadBytes: parts.maxPayloadBytes,
      cleanupHorizon: true,
      headSkip: parts.headSkip,
      logger: parts.logger,
    });
    this.pg = pg;
    this.pool = pg.pool;
    this.hotPool = pg.hotPool;
    this.capabilities = {
      ...this.capabilities,
      // The claim and the NOTIFY pipelined behind a store transaction's COMMIT (pipeline/README.md).
      commitRiding: {
        claimById: (tx, p) => this.claimByIdOnCommit(tx, p),
        notify: (tx) => this.wakeups.notifyOnCommit(tx),
      },
    };
    // On a durable hot path the claim after COMMIT stays durable too. Its text (so its prepared
    // name) differs from claimById's either way: pipeline/commit.ts and pg's own queries never share a name.
    const claimAfterCommit =
      this.hotPool === this.pool ? `${this.sql.claimById}\n-- after COMMIT` : this.sql.claimByIdAfterCommit;
    // A text (so a prepared name) of its own, never used by pg's own queries (see pipeline/batch.ts).
    const insertOneInBatch = `${this.sql.insertOne}\n-- in a batch`;
    this.insertOneInBatch = pg.batchStatement(insertOneInBatch);
    this.insertWithId = pg.batchStatement(this.sql.insertOneWithId);
    this.completeAtCommit = pg.batchStatement(this.sql.completeAtCommit);
    this.ids = new IdReserve(this.pool, this.sql.takeIds, parts.names.table, ID_BLOCK, parts.logger);
    this.riders = new CommitRiders(this.wakeups, pg.batchStatement(claimAfterCommit), parts.logger);
  }

  override transaction<T>(fn: (tx: PoolClient) => Promise<T>): Promise<T> {
    return runInTransaction(this.pool, fn, this.riders);
  }

  /**
   * A transactional attempt's completion on a store transaction: held, to go out with its COMMIT
   * in one write and one round trip (a statement's round trip fewer per attempt).
   */
  protected override completionEngine(): TransactionalCompletionEngine<PoolClient> {
    const engine = super.completionEngine();
    const direct = engine.savepoints;
    return {
      ...engine,
      completeAtCommit: (tx, checked) => this.holdCompletion(tx, checked),
      claimLost: (error) => (error as { code?: unknown } | null)?.code === CLAIM_LOST,
      // On a store transaction a savepoint waits to go out with the next statement (the attempt's
      // own first one): an attempt that shares the transaction costs no round trip of its own.
      ...(direct && {
        savepoints: {
          open: async (tx, name) => {
            const deferred = this.riders.deferred(tx);
            if (deferred === undefined) return direct.open(tx, name);
            deferred.hold({ text: `SAVEPOINT ${name}` });
          },
          rollbackTo: async (tx, name) => {
            const deferred = this.riders.deferred(tx);
            if (deferred === undefined) return direct.rollbackTo(tx, name);
            await deferred.run({ text: `ROLLBACK TO SAVEPOINT ${name}` });
          },
          completeAll: (tx, checked) => direct.completeAll(tx, checked),
          failed: (tx) => failedTransaction(tx),
        },
      }),
    };
  }

  private holdCompletion(tx: PoolClient | Port.SqlExecutor, checked: CheckedCompletedAttempt): boolean {
    const deferred = isSqlExecutor(tx) ? undefined : this.riders.deferred(tx);
    if (deferred === undefined) return false;
    deferred.hold({
      ...this.completeAtCommit,
      values: [checked.id, checked.token, checked.resultJson ?? null],
    });
    return true;
  }

  protected override async insertOne(tx: PoolClient, params: unknown[]): Promise<Port.CommandId[]> {
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
    return super.insertOne(tx, params);
  }

  /** claimDue's values: now, types, limit, token, lease ms, instance. */
  protected override async claimUnlimited(values: unknown[]): Promise<Port.ClaimedCommand[]> {
    // The claim that follows a notification runs on the LISTEN connection that just delivered it.
    // That connection is always a direct one: its statements may be prepared.
    return this.claimFromHeadOrPast(
      values,
      (text, v) =>
        this.wakeups.lendAfterWake((on) => this.pg.prepared<ClaimedRow>(on, text, v, true)) ??
        this.pg.hot<ClaimedRow>(text, v),
    );
  }

  /**
   * claimById run right after `tx` commits, in the same round trip as its COMMIT (pipeline/commit-riders.ts);
   * null when `tx` is not an open transaction of this store's transaction() or already has one.
   */
  claimByIdOnCommit(tx: ClientBase, v: CheckedClaimById): Promise<Port.ClaimedCommand | null> | null {
    // A claim within type limits takes a transaction of its own: claimById after commit does it.
    if (v.limitedTypes.length > 0) return null;
    const types = v.types === null ? null : arrayLiteral(v.types);
    const claimed = this.riders.claimOnCommit(tx, [
      v.id,
      v.now.toISOString(),
      v.token,
      String(v.leaseMs),
      types,
      v.instance,
    ]);
    return claimed && claimed.then((row) => (row ? (toRecord(row) as Port.ClaimedCommand) : null));
  }

  /** Stops wake-ups and id refills and, when the store opened the pools, ends them. Idempotent. */
  override close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.all([this.wakeups.close(), this.ids.close()]);
      await this.pg.close();
    })();
    return this.closing;
  }
}

/**
 * Whether `client`'s transaction block has failed ('E'), as of its last ReadyForQuery. A statement's
 * error reaches its caller before the ReadyForQuery that follows it: while one is still awaited,
 * the answer waits for it.
 */
async function failedTransaction(client: ClientBase): Promise<boolean> {
  // pg's own flag: false from a query's send until its ReadyForQuery (an error answer comes first).
  const c = client as ClientBase & {
    readyForQuery?: boolean;
    connection?: EventEmitter & { stream?: { destroyed?: boolean } };
  };
  const connection = c.connection;
  // A connection that is gone answers nothing more: the transaction is lost either way.
  if (c.readyForQuery === false && connection !== undefined && connection.stream?.destroyed !== true) {
    await new Promise<void>((resolve) => {
      const done = (): void => {
        connection.off('readyForQuery', done);
        connection.off('end', done);
        connection.off('error', done);
        resolve();
      };
      connection.on('readyForQuery', done);
      connection.on('end', done);
      connection.on('error', done);
    });
  }
  return transactionStatus(client) === 'E';
}
