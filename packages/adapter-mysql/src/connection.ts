import type {
  Connection,
  FieldPacket,
  Pool,
  PoolConnection,
  PoolOptions,
  ResultSetHeader,
  RowDataPacket,
} from 'mysql2/promise';
import { createPool } from 'mysql2/promise';

/**
 * The few things every statement of this adapter needs from mysql2, in one place: a pool whose
 * dead connections never crash the process, per-query read options that do not depend on how the
 * caller configured a pool or connection, and the classification of the errors worth retrying.
 */

/** Anything that runs a text query: a pool, a connection, a pool connection. */
export type Queryable = Pick<Connection, 'query'>;

/**
 * Read options set on every query, so results are right even on a caller's connection configured
 * otherwise: BIGINT ids as decimal text (no precision lost past 2^53), DATETIME as text that the
 * rows module reads as UTC (mysql2 would otherwise apply the client's local time zone).
 */
const READ_OPTIONS = { supportBigNumbers: true, bigNumberStrings: true, dateStrings: true } as const;

/**
 * Runs a statement with bound values (`query()`, not `execute()`: an array bound to `IN (?)` must
 * expand into a list, which prepared statements silently do not do).
 */
export async function select<T>(db: Queryable, sql: string, values: readonly unknown[] = []): Promise<T[]> {
  const [rows] = (await db.query({ sql, values: [...values], ...READ_OPTIONS })) as [
    RowDataPacket[],
    FieldPacket[],
  ];
  return rows as unknown as T[];
}

export async function write(
  db: Queryable,
  sql: string,
  values: readonly unknown[] = [],
): Promise<ResultSetHeader> {
  const [header] = (await db.query({ sql, values: [...values], ...READ_OPTIONS })) as [
    ResultSetHeader,
    FieldPacket[],
  ];
  return header;
}

/** The pool options the store insists on when it builds its own pool. */
export function ownPoolOptions(connection: string | PoolOptions, connectionLimit: number): PoolOptions {
  const base: PoolOptions = typeof connection === 'string' ? { uri: connection } : connection;
  return {
    connectionLimit,
    enableKeepAlive: true,
    ...base,
    supportBigNumbers: true,
    bigNumberStrings: true,
    dateStrings: true,
    // Dates are bound as UTC text by the store itself; this only keeps stray Date values honest.
    timezone: 'Z',
    charset: 'UTF8MB4_GENERAL_CI',
  };
}

/**
 * A pool built by the store. A connection that the server kills (or the network drops) while idle
 * emits 'error' after mysql2 already removed it from the pool; without a listener that second
 * event would be an uncaught exception that ends the process. `sessionSetup`, if given, runs on
 * each new connection ahead of anything the pool hands it out for; a connection it fails on is
 * destroyed, so none is used half set up.
 */
export function openPool(
  options: PoolOptions,
  onConnectionError: (e: Error) => void,
  sessionSetup?: string,
): Pool {
  const pool = createPool(options);
  pool.on('connection', (conn) => {
    const core = conn as unknown as CoreConnection;
    core.on('error', onConnectionError);
    if (sessionSetup === undefined) return;
    core.query(sessionSetup, (e) => {
      if (e === null) return;
      onConnectionError(e);
      core.destroy();
    });
  });
  return pool;
}

/** The callback-style connection mysql2 hands to a pool's 'connection' listeners. */
interface CoreConnection {
  on(event: 'error', listener: (e: Error) => void): void;
  query(sql: string, callback: (e: Error | null) => void): void;
  destroy(): void;
}

/** Connections of the store's claim pool: claims run one round at a time per scheduler. */
const CLAIM_CONNECTIONS = 2;

/** Every transaction of a claim connection is READ COMMITTED, set once when it connects. */
export const READ_COMMITTED_SESSION = 'SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED';

/**
 * The claim pool's options: the store's own, fewer connections, and several statements per round
 * trip (values are still escaped by mysql2, and migrate() refuses NO_BACKSLASH_ESCAPES).
 */
export function claimPoolOptions(own: PoolOptions): PoolOptions {
  return {
    ...own,
    // mysql2 reads 0 as "no limit".
    connectionLimit: Math.min(own.connectionLimit || CLAIM_CONNECTIONS, CLAIM_CONNECTIONS),
    multipleStatements: true,
  };
}

/** The results of a multi-statement query, one per statement. */
export async function selectEach(
  db: Queryable,
  sql: string,
  values: readonly unknown[] = [],
): Promise<unknown[]> {
  const [results] = (await db.query({ sql, values: [...values], ...READ_OPTIONS })) as [
    unknown[],
    FieldPacket[],
  ];
  return results;
}

/** Runs `fn` on one pooled connection; a connection that broke is destroyed, never reused. */
export async function withConnection<T>(pool: Pool, fn: (conn: PoolConnection) => Promise<T>): Promise<T> {
  const conn = await pool.getConnection();
  let broken = false;
  try {
    return await fn(conn);
  } catch (e) {
    broken = isConnectionLost(e);
    throw e;
  } finally {
    if (broken) conn.destroy();
    else conn.release();
  }
}

/**
 * A short transaction on a pooled connection. `readCommitted` applies to this transaction only
 * (SET TRANSACTION without SESSION), so the connection keeps the server's default afterwards.
 */
export async function inTransaction<T>(
  pool: Pool,
  readCommitted: boolean,
  fn: (conn: PoolConnection) => Promise<T>,
): Promise<T> {
  return withConnection(pool, async (conn) => {
    if (readCommitted) await conn.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
    await conn.query('START TRANSACTION');
    try {
      const result = await fn(conn);
      await conn.query('COMMIT');
      return result;
    } catch (e) {
      await rollbackQuietly(conn);
      throw e;
    }
  });
}

/** Rolls back after a failure; a rollback that fails too (the connection is gone) changes nothing. */
export async function rollbackQuietly(conn: Queryable): Promise<void> {
  try {
    await conn.query('ROLLBACK');
  } catch {
    // The server rolls back a transaction whose connection died; the first error is the one to report.
  }
}

interface DriverError {
  readonly code?: unknown;
  readonly errno?: unknown;
  readonly fatal?: unknown;
}

function driverError(e: unknown): DriverError {
  return typeof e === 'object' && e !== null ? (e as DriverError) : {};
}

const ER_DUP_ENTRY = 1062;
/** On Galera: the node is not ready for SQL (not in the primary component, or not synced yet). */
const ER_UNKNOWN_COM_ERROR = 1047;
/** On Galera: the commit could not be replicated (a cluster change under it); it was rolled back. */
const ER_ERROR_DURING_COMMIT = 1180;
const ER_LOCK_WAIT_TIMEOUT = 1205;
/** Also Galera's certification failure and brute-force abort: another node's write won the race. */
const ER_LOCK_DEADLOCK = 1213;

/**
 * A transaction of the store that lost a race without an error from the server: on Galera a
 * transaction aborted by another node's replicated write can seem to commit, so a claim or an
 * outcome write that finds fewer rows changed than it locked is undone and tried again.
 */
export class LostRaceError extends Error {
  constructor(what: string) {
    super(`${what}: the rows changed under the transaction (another node won them)`);
    this.name = 'LostRaceError';
  }
}

/**
 * A deadlock victim, a lock-wait timeout or a Galera certification failure: the statement (or
 * transaction) was rolled back; try again.
 */
export function isLockConflict(e: unknown): boolean {
  const { errno } = driverError(e);
  return errno === ER_LOCK_DEADLOCK || errno === ER_LOCK_WAIT_TIMEOUT || e instanceof LostRaceError;
}

/** The server rolled the whole transaction back to break a deadlock (or, on Galera, another node's write won). */
export function isDeadlock(e: unknown): boolean {
  return driverError(e).errno === ER_LOCK_DEADLOCK;
}

/** A Galera node in the middle of a cluster change: rolled back, worth a few tries a little later. */
export function isClusterChange(e: unknown): boolean {
  const { errno } = driverError(e);
  return errno === ER_UNKNOWN_COM_ERROR || errno === ER_ERROR_DURING_COMMIT;
}

export function isDuplicateKey(e: unknown): boolean {
  return driverError(e).errno === ER_DUP_ENTRY;
}

const CONNECTION_CODES = new Set([
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'ER_CONNECTION_KILLED',
  'ER_SERVER_SHUTDOWN',
]);

/** The connection is unusable (killed, reset, server gone): the work on it may be tried on another. */
export function isConnectionLost(e: unknown): boolean {
  const { code, fatal } = driverError(e);
  return fatal === true || (typeof code === 'string' && CONNECTION_CODES.has(code));
}

const LOCK_RETRY_ATTEMPTS = 12;
const CLUSTER_CHANGE_ATTEMPTS = 8;

/**
 * Runs `fn` again when it lost a race: InnoDB picked it as a deadlock victim, its lock wait timed
 * out, or (Galera) another node's write won certification. The first retry goes at once (the
 * winner's rows are already taken by then, so the next try finds others), later ones after a short
 * jittered pause, about 0.3 s in all at most. A Galera node in a cluster change gets a few tries
 * 50–400 ms apart (about 2 s in all). These are contention, not failures of any command, so they
 * never reach the caller unless they persist.
 */
export async function retryLockConflicts<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (isLockConflict(e) && attempt < LOCK_RETRY_ATTEMPTS) {
        if (attempt > 1) await sleep(Math.random() * Math.min(50, 2 ** attempt));
      } else if (isClusterChange(e) && attempt < CLUSTER_CHANGE_ATTEMPTS) {
        await sleep(Math.min(400, 25 * 2 ** attempt));
      } else throw e;
    }
  }
}

/** Runs `fn` once more on another connection when the first one was lost under it. */
export async function retryConnectionLoss<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (!isConnectionLost(e)) throw e;
    return fn();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
