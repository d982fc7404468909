import { createHash } from 'node:crypto';
import type { Logger } from '@asynccmd/core';
import type { ClientBase, CustomTypesConfig, Pool, PoolClient, QueryResultRow } from 'pg';
import { isTransientSqlState, rolledBackIfAborted } from './connection.js';
import type { PostgresConnection, TextRows } from './connection.js';
import { FAST_COMMIT_STEP, HotStatements } from './pipeline/hot-statements.js';
import { throughTransactionPooler } from './pipeline/transaction-statements.js';
import { runInTransaction } from './pipeline/transaction.js';

/**
 * The store parses its own rows from text instead of trusting pg's global type parsers, which
 * applications often change (`setTypeParser(20, parseInt)` would corrupt ids beyond 2^53).
 */
export const RAW_TYPES: CustomTypesConfig = {
  getTypeParser: (() => (text: string) => text) as unknown as CustomTypesConfig['getTypeParser'],
};

export interface PgConnectionParts {
  readonly pool: Pool;
  /** Where the hot path's writes run (claims, heartbeats, outcomes); default `pool`. */
  readonly hotPool?: Pool;
  /** Whether close() ends the pools (false for a pool the application passed in). */
  readonly ownsPool: boolean;
  readonly logger: Logger;
  /**
   * The pools reach PostgreSQL through a transaction pooler (PgBouncer `pool_mode = transaction`):
   * no named prepared statements, and the hot path's `synchronous_commit = off` (when `hotPool` is
   * not `pool`) set in each of its transactions instead of at connection start-up. Default false.
   */
  readonly transactionPooler?: boolean;
}

/**
 * The engine's connection on pg: statements on `pool`, the hot path batched on `hotPool`
 * (pipeline/hot-statements.ts), frequent statements as named prepared statements, the store's
 * transactions through pipeline/transaction.ts.
 */
export class PgConnection implements PostgresConnection<PoolClient> {
  readonly transactionHandle = {
    name: 'a pg client',
    is: (candidate: object): boolean => {
      const client = candidate as { query?: unknown; connect?: unknown };
      return typeof client.query === 'function' && typeof client.connect === 'function';
    },
  };
  readonly pool: Pool;
  /** The pool of claims, heartbeats and outcomes: losing one of those only runs a command again. */
  readonly hotPool: Pool;
  /** Named prepared statements may be used on the pools (false through a transaction pooler). */
  readonly named: boolean;
  private readonly ownsPool: boolean;
  /** Statement text → its prepared name, hashed once per statement. */
  private readonly preparedNames = new Map<string, string>();
  private readonly hotStatements: HotStatements;
  private readonly onIdleError: (err: Error) => void;
  private readonly onClientConnect: (client: PoolClient) => void;
  private closing: Promise<void> | null = null;

  constructor(parts: PgConnectionParts) {
    this.pool = parts.pool;
    this.hotPool = parts.hotPool ?? parts.pool;
    this.ownsPool = parts.ownsPool;
    this.named = parts.transactionPooler !== true;
    if (!this.named) for (const pool of this.pools()) throughTransactionPooler(pool);
    this.hotStatements = new HotStatements(
      this.hotPool,
      (statement) => this.prepared(this.hotPool, statement.text, statement.values),
      parts.logger,
      // Through a pooler the fast commit is asked for in each transaction (see index.ts SESSION_OPTIONS).
      this.named ? null : { prefix: this.hotPool === this.pool ? [] : [FAST_COMMIT_STEP] },
    );
    // pg emits 'error' on an idle pooled client whose server connection dies (restart,
    // pg_terminate_backend, network); unheard, it would crash the process. The pool has already
    // dropped that client, and the next query opens a fresh one.
    this.onIdleError = (err) => parts.logger.warn({ err }, 'asynccmd: idle PostgreSQL connection lost');
    for (const pool of this.pools()) pool.on('error', this.onIdleError);
    // And between two holders: pg-pool hands a released client to a waiting connect() at once,
    // inside the socket read that answered its last query, taking its idle listener off; the new
    // holder's listener comes a tick later. A FATAL in that same read (a server going down: seen
    // in a failover test) was emitted with nobody listening and crashed the worker. So every client
    // of the store's pools keeps a listener of its own; what runs next on it fails as it would.
    const onClientError = (err: Error): void =>
      parts.logger.debug({ err }, 'asynccmd: a PostgreSQL connection between two holders was lost');
    this.onClientConnect = (client) => {
      client.on('error', onClientError);
    };
    for (const pool of this.pools()) pool.on('connect', this.onClientConnect);
  }

  async query<R extends object>(text: string, values?: readonly unknown[]): Promise<TextRows<R>> {
    const result = await this.pool.query<R & QueryResultRow>({
      text,
      values: values === undefined ? undefined : [...values],
      types: RAW_TYPES,
    });
    return { rows: result.rows, rowCount: result.rowCount ?? 0 };
  }

  transaction<T>(fn: (tx: PoolClient) => Promise<T>): Promise<T> {
    return runInTransaction(this.pool, fn);
  }

  claimTransaction<T>(fn: (tx: PoolClient) => Promise<T>): Promise<T> {
    // Through a transaction pooler the hot pool's sessions have no fast commit of their own.
    return runInTransaction(this.named ? this.hotPool : this.pool, fn);
  }

  async queryIn<R extends object>(
    tx: PoolClient,
    text: string,
    values?: readonly unknown[],
  ): Promise<TextRows<R>> {
    const result = await tx.query<R & QueryResultRow>({
      text,
      values: values === undefined ? undefined : [...values],
      types: RAW_TYPES,
    });
    return { rows: result.rows, rowCount: result.rowCount ?? 0 };
  }

  preparedIn<R>(tx: ClientBase, text: string, values: readonly unknown[]): Promise<R[]> {
    return this.prepared<R & QueryResultRow>(tx, text, values);
  }

  /**
   * A hot-path statement on `hotPool`, as a named prepared statement (each connection parses and
   * plans it once instead of on every claim and outcome), sent together with the others asked for
   * in the same turn (pipeline/hot-statements.ts).
   */
  hot<R>(text: string, values: readonly unknown[]): Promise<R[]> {
    return this.hotStatements.run<R & QueryResultRow>({ name: this.preparedName(text), text, values });
  }

  /**
   * A statement as a named prepared statement on `on`'s connection: submits (on the caller's
   * transaction) and the hot path run so often that planning each time would cost more than
   * running them (measured: a single submit's INSERT, 8 clients, ~4,000/s planned every time
   * against ~6,500/s prepared).
   */
  async prepared<R extends QueryResultRow>(
    on: Pick<ClientBase, 'query'> | Pool,
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
  batchStatement(text: string): { readonly name?: string; readonly text: string } {
    return this.named ? { name: this.preparedName(text), text } : { text };
  }

  isTransient(error: unknown): boolean {
    return isTransientTransactionError(error);
  }

  /** Ends the pools when the store opened them. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const pool of this.pools()) {
        if (this.ownsPool) await pool.end();
        else {
          pool.removeListener('error', this.onIdleError);
          pool.removeListener('connect', this.onClientConnect);
        }
      }
    })();
    return this.closing;
  }

  /** The pools, each once. */
  private pools(): Pool[] {
    return this.hotPool === this.pool ? [this.pool] : [this.pool, this.hotPool];
  }

  private preparedName(text: string): string {
    let name = this.preparedNames.get(text);
    if (name === undefined) {
      name = preparedName(text);
      this.preparedNames.set(text, name);
    }
    return name;
  }
}

/**
 * A statement's prepared name, from a hash of its text: two stores on one pool (other schema or
 * table) never give one name to two different statements.
 */
function preparedName(text: string): string {
  return `asynccmd_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
}

/** Socket errors of a connection that died or could not be made. */
const LOST_SOCKET_CODES: ReadonlySet<string> = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

/**
 * A transaction lost through no fault of its statements: a transient SQLSTATE
 * (connection.ts isTransientSqlState), a socket error, or pg's own word that the connection ended.
 */
function isTransientTransactionError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (isTransientSqlState(code)) return true;
  if (typeof code === 'string' && LOST_SOCKET_CODES.has(code)) return true;
  return (
    error instanceof Error &&
    /Connection terminated|connection error|timeout exceeded when trying to connect/i.test(error.message)
  );
}
