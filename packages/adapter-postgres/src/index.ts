import { InvalidArgumentError, requireInt, silentLogger } from '@asynccmd/core';
import type { Logger } from '@asynccmd/core';
import { headSkipSettings, type HeadSkipOption } from '@asynccmd/core/store-kit';
import pg from 'pg';
import type { ClientConfig, Pool, PoolConfig } from 'pg';
import { tableNames } from './names.js';
import { postgresStore, type PostgresCommandStore } from './pg-store.js';
import { PostgresWakeups } from './wakeups.js';

export type { PostgresCommandStore } from './pg-store.js';
export type { PostgresWakeups } from './wakeups.js';

/** Session settings of the store's own pool: the claim's isolation, and the time format rows.ts reads. */
const SESSION_OPTIONS = '-c default_transaction_isolation=read\\ committed -c DateStyle=ISO';
/** Added for the hot-path pool: its commits return before their WAL record reaches the disk. */
const FAST_COMMIT_OPTIONS = '-c synchronous_commit=off';
/** Through a transaction pooler, the date format rows.ts reads, for the session (see createPostgresStore). */
const ISO_DATES = 'SET DateStyle = ISO';

export interface PostgresStoreOptions {
  /**
   * An existing pool to run on; the store never ends it. Its sessions should use READ COMMITTED
   * (PostgreSQL's default), which the claim statements are written for.
   */
  readonly pool?: Pool;
  /**
   * Or a postgres:// URI or pg pool options: the store opens (and on close ends) its own pool from
   * them — the same shape as the other adapters' factories. With neither, pg's PG* environment
   * variables say where to connect.
   */
  readonly connection?: string | PoolConfig;
  /** The same as `connection`, in pg's own two spellings: a URI, pool options, or both. */
  readonly connectionString?: string;
  readonly poolConfig?: PoolConfig;
  /** Default 'public'; created by migrate() when missing. */
  readonly schema?: string;
  /** Default 'async_command'. */
  readonly table?: string;
  /** Largest payload accepted, in UTF-8 bytes of its JSON. Default core DEFAULT_MAX_PAYLOAD_BYTES (64 KiB). */
  readonly maxPayloadBytes?: number;
  /** Coalescing window of wake-up NOTIFYs, in ms: at most one per window per process. Default 5. */
  readonly wakeupWindowMs?: number;
  /** Reconnect backoff of the LISTEN connection, in ms. Default 100 doubling to 5000. */
  readonly listenReconnectMinMs?: number;
  readonly listenReconnectMaxMs?: number;
  /**
   * Default false: the store's own hot-path writes (claimDue, claimById, heartbeat, complete,
   * release, fail) run on a second pool of its own (and, for claims, the LISTEN connection) with
   * `synchronous_commit = off`, so they do not wait for the WAL flush. If the database server
   * crashes, the last few hundred ms of those writes may be undone: a claim or outcome is lost and
   * the command runs again (at-least-once; executors are idempotent). Submits (in your
   * transaction), `transaction()`, admin transitions, reclaim, purge and migrations stay durable. True runs everything on one pool, durably. A `pool` you pass
   * in is always used as it is (durable unless you configured it otherwise).
   */
  readonly durableClaims?: boolean;
  /**
   * `'transaction'`: the store's connections go through a transaction pooler (PgBouncer
   * `pool_mode = transaction`, the way much hosted PostgreSQL is reached), where each transaction
   * may run on another server connection. The store then uses no session state: no start-up
   * `options` (settings go into each transaction, `set_config(…, true)`), no named prepared
   * statements (its own and its submits in your transactions), and no LISTEN unless
   * `listenConnection` names a direct connection — without one, other processes' work is found by
   * polling (`pollIntervalMs` of the runtime: up to that much later). Default `'none'`: direct
   * connections, or a pooler in session mode that accepts start-up options.
   */
  readonly pooler?: 'none' | 'transaction';
  /**
   * Where the LISTEN connection (wake-ups, revocations, the claim after a wake-up) connects: a
   * postgres:// URI or pg client options of a direct connection to the same database, never a
   * transaction pooler. Default: the store's own connection settings (none through a transaction pooler).
   */
  readonly listenConnection?: string | ClientConfig;
  /**
   * Claims that start past a slow head of the claim index: while a snapshot held elsewhere keeps
   * vacuum from removing the entries claimed rows leave there, a claim from the head reads all of
   * them. When one takes `slowMs` (plus a 500th of it per row it claimed: 0.1 ms at the default)
   * or more, the next claims start at the last row claimed, and one from the head every
   * `headEveryMs` (or 20 times its own length, if longer) finds what was committed behind it (a
   * higher priority, a late commit): such a command waits up to that long, and only then. The reclaim of lapsed leases does the same:
   * while a full scan is that slow, the next ones read only the leases lapsed since the scan
   * before. Default `{ slowMs: 50, headEveryMs: 1000 }`; `false` always reads from the head.
   */
  readonly slowHeadSkip?: HeadSkipOption;
  readonly logger?: Logger;
}

/**
 * A PostgreSQL command store. Validates `schema` and `table` (core InvalidIdentifierError for a
 * hostile name); call `migrate()` before use.
 */
export function createPostgresStore(options: PostgresStoreOptions = {}): PostgresCommandStore {
  // Only an absent option takes the default: an explicit null or '' is a bad name, refused.
  const names = tableNames(
    options.schema === undefined ? 'public' : options.schema,
    options.table === undefined ? 'async_command' : options.table,
  );
  refuseUnsetDestination(options);
  const spellings = [options.pool, options.connection, options.connectionString ?? options.poolConfig];
  if (spellings.filter((given) => given !== undefined).length > 1) {
    throw new InvalidArgumentError(
      'give the PostgreSQL store one of `pool`, `connection` or `connectionString`/`poolConfig`',
    );
  }
  const { connectionString, poolConfig } = connectionSettings(options);
  const windowMs = requireInt('wakeupWindowMs', options.wakeupWindowMs ?? 5, 0);
  const reconnectMinMs = requireInt('listenReconnectMinMs', options.listenReconnectMinMs ?? 100, 1);
  const reconnectMaxMs = requireInt(
    'listenReconnectMaxMs',
    options.listenReconnectMaxMs ?? 5000,
    reconnectMinMs,
  );
  const logger = options.logger ?? silentLogger;
  const headSkip = headSkipSettings(options.slowHeadSkip);
  const pooled = transactionPooler(options.pooler);
  const ownsPool = options.pool === undefined;
  const fast = options.durableClaims !== true;
  const ownPool = (extraOptions: string): Pool => {
    // The date format is one of the few settings PgBouncer keeps per client and restores on every
    // server connection it lends, so a session-level SET holds; the rest goes into each transaction.
    // pg-pool 3.14+ (pg 8.23) awaits onConnect before lending the client; older ones only emit
    // 'connect', where the SET is queued ahead of the borrower's first query.
    const datesSet = new WeakSet<object>();
    const own = new pg.Pool({
      ...poolConfig,
      ...(connectionString === undefined ? {} : { connectionString }),
      // Whatever the server's defaults: READ COMMITTED, as the claim statements need, and ISO dates.
      // Set at connection start-up, so it costs no round trip. A transaction pooler refuses them.
      ...(pooled
        ? {
            onConnect: async (client: pg.ClientBase) => {
              datesSet.add(client);
              await client.query(ISO_DATES);
            },
          }
        : { options: sessionOptions(poolConfig?.options, extraOptions) }),
    });
    if (pooled) {
      own.on('connect', (client) => {
        if (!datesSet.has(client)) void client.query(ISO_DATES).catch(() => undefined);
      });
    }
    return own;
  };
  const pool = options.pool ?? ownPool('');
  const hotPool = ownsPool && fast ? ownPool(FAST_COMMIT_OPTIONS) : pool;
  const wakeups = new PostgresWakeups({
    pool,
    // Claims after a wake-up may run on the LISTEN connection: it takes the hot path's settings.
    clientConfig: listenSettings(options.listenConnection, pooled, hotPool, fast && ownsPool),
    channel: names.channel,
    windowMs,
    reconnectMinMs,
    reconnectMaxMs,
    logger,
  });
  return postgresStore({
    pool,
    hotPool,
    ownsPool,
    names,
    wakeups,
    logger,
    maxPayloadBytes: options.maxPayloadBytes,
    transactionPooler: pooled,
    headSkip,
  });
}

/**
 * A destination option present but undefined (or ''), as `connection: process.env.DATABASE_URL` is
 * when the variable is unset: refused here, as the other adapters do, rather than silently falling
 * back to pg's PG* environment variables and failing at the first query with the driver's text.
 * Leaving the options out altogether still means those variables.
 */
function refuseUnsetDestination(options: PostgresStoreOptions): void {
  for (const key of ['pool', 'connection', 'connectionString'] as const) {
    if (!Object.hasOwn(options, key)) continue;
    const given: unknown = options[key];
    if (given === undefined || given === null || given === '') {
      throw new InvalidArgumentError(
        `\`${key}\` is ${given === '' ? 'empty' : String(given)} (an unset environment variable?): ` +
          "give the PostgreSQL store a postgres:// URI, pg pool options or a pool, or leave it out to use pg's PG* environment variables",
      );
    }
  }
}

function transactionPooler(pooler: unknown): boolean {
  if (pooler === undefined || pooler === 'none') return false;
  if (pooler === 'transaction') return true;
  throw new InvalidArgumentError("pooler must be 'none' or 'transaction'");
}

/** Start-up options: the caller's own, the store's session settings, then `extra`. */
function sessionOptions(own: string | undefined, extra: string): string {
  return [own, SESSION_OPTIONS, extra].filter(Boolean).join(' ');
}

/**
 * The LISTEN connection's settings: the `listenConnection` given, with the store's session options
 * (it is a direct connection); else the hot pool's own, unless that is a transaction pooler's (then
 * there is none).
 */
function listenSettings(
  given: string | ClientConfig | undefined,
  pooled: boolean,
  hotPool: Pool,
  fast: boolean,
): ClientConfig | null {
  if (given === undefined) return pooled ? null : listenConfig(hotPool);
  let config: ClientConfig;
  if (typeof given === 'string') config = { connectionString: given };
  else if (typeof given === 'object' && given !== null) config = given;
  else throw new InvalidArgumentError('listenConnection must be a postgres:// URI or pg client options');
  return {
    ...config,
    options: sessionOptions(config.options, fast ? FAST_COMMIT_OPTIONS : ''),
    connectionTimeoutMillis: config.connectionTimeoutMillis || 10_000,
  };
}

/** Where the store's own pool connects, whichever way the options said it. */
function connectionSettings(options: PostgresStoreOptions): {
  connectionString?: string;
  poolConfig?: PoolConfig;
} {
  const { connection } = options;
  if (connection === undefined)
    return { connectionString: options.connectionString, poolConfig: options.poolConfig };
  if (typeof connection === 'string') return { connectionString: connection };
  if (typeof connection !== 'object' || connection === null) {
    throw new InvalidArgumentError('connection must be a postgres:// URI or pg pool options');
  }
  return { poolConfig: connection };
}

/** The LISTEN connection opens with the pool's own connection settings. */
function listenConfig(pool: Pool): ClientConfig {
  const { max: _max, min: _min, idleTimeoutMillis: _idle, ...config } = pool.options as PoolConfig;
  // A connect that never answers (a partitioned server) must not hold up close() forever.
  return { ...config, connectionTimeoutMillis: config.connectionTimeoutMillis || 10_000 };
}
