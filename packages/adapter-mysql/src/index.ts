import type { Logger } from '@asynccmd/core';
import { InvalidArgumentError, silentLogger } from '@asynccmd/core';
import * as E from 'fp-ts/lib/Either.js';
import type { Pool, PoolOptions } from 'mysql2/promise';
import type { ClaimStrategyName } from './claim-strategies.js';
import { CLAIM_STRATEGIES } from './claim-strategies.js';
import { claimPoolOptions, openPool, ownPoolOptions, READ_COMMITTED_SESSION } from './connection.js';
import { mysqlStore, type MysqlCommandStore } from './store.js';
import { headSkipSettings, validateIdentifier, type HeadSkipOption } from '@asynccmd/core/store-kit';

export type { MysqlCommandStore } from './store.js';
export type { ClaimStrategyName } from './claim-strategies.js';

const DEFAULT_TABLE = 'async_command';

export interface MysqlStoreOptions {
  /**
   * A mysql2/promise pool to use (the caller keeps it: close() does not end it). Queries set their
   * own read options, so its supportBigNumbers / dateStrings settings do not matter.
   */
  readonly pool?: Pool;
  /** Or connection options / a mysql:// URI; the store builds and owns its pool. */
  readonly connection?: string | PoolOptions;
  /** Connections of a pool the store builds; default 10. */
  readonly connectionLimit?: number;
  /** Table name, validated as an identifier; default 'async_command'. */
  readonly table?: string;
  /**
   * Step 1 of the claim: 'skip-locked' (MySQL ≥ 8.0.1, MariaDB ≥ 10.6), 'legacy' (a
   * derived-table UPDATE, for older servers), or 'auto' (default): chosen from the server version.
   */
  readonly claimStrategy?: 'auto' | ClaimStrategyName;
  /** Largest payload accepted, in UTF-8 bytes of its JSON; default 64 KiB. */
  readonly maxPayloadBytes?: number;
  /**
   * Where connection errors of the store's own pool, and trouble moving finished commands to the
   * history or keeping its partitions, are reported.
   */
  readonly logger?: Logger;
  /**
   * Claims past a slow head of the claim index: while a snapshot held elsewhere (an analytics
   * query, a forgotten open transaction) keeps InnoDB from purging the entries claimed rows leave
   * there, a claim's locking read looks every one of them up. When a claim from the head takes
   * `slowMs` (plus a 500th of it per row it claimed: 0.1 ms at the default) or more, the next
   * claims read their candidates without locks and then lock them by primary key, and one claim
   * from the head every `headEveryMs` (or 20 times its own length, if longer) tells whether the
   * head is fast again (docs/operations.md). Default `{ slowMs: 50, headEveryMs: 1000 }`; `false`
   * always claims from the head.
   */
  readonly slowHeadSkip?: HeadSkipOption;
}

/**
 * Builds a MySQL / MariaDB command store. Nothing is sent to the server yet: call `migrate()`
 * before use (it also settles the 'auto' claim strategy from the server version).
 */
export function createMysqlStore(options: MysqlStoreOptions): MysqlCommandStore {
  // Only an absent table means the default: null or '' is a mistake to refuse, not to paper over.
  const table = validateIdentifier('table', options.table === undefined ? DEFAULT_TABLE : options.table);
  if (E.isLeft(table)) throw table.left;
  const headSkip = headSkipSettings(options.slowHeadSkip);
  const choice = options.claimStrategy ?? 'auto';
  if (choice !== 'auto' && !Object.hasOwn(CLAIM_STRATEGIES, choice)) {
    throw new InvalidArgumentError(
      `claimStrategy must be 'auto', 'skip-locked' or 'legacy', not ${String(choice)}`,
    );
  }
  if ((options.pool === undefined) === (options.connection === undefined)) {
    throw new InvalidArgumentError('give the MySQL store exactly one of `pool` or `connection`');
  }
  const logger = options.logger ?? silentLogger;
  const onConnectionError = (e: Error): void =>
    logger.warn({ err: e, table: table.right }, 'asynccmd: a MySQL connection of the store was lost');
  let pool = options.pool;
  let claimPool: Pool | null = null;
  if (pool === undefined) {
    const own = ownPoolOptions(options.connection as string | PoolOptions, options.connectionLimit ?? 10);
    pool = openPool(own, onConnectionError);
    // Claims get connections of their own, READ COMMITTED once per session rather than per claim;
    // the store's other transactions (the caller's included) keep the server's default isolation.
    claimPool = openPool(claimPoolOptions(own), onConnectionError, READ_COMMITTED_SESSION);
  }
  return mysqlStore({
    pool,
    ownsPool: options.pool === undefined,
    claimPool,
    table: table.right,
    strategy: choice === 'auto' ? 'auto' : CLAIM_STRATEGIES[choice],
    maxPayloadBytes: options.maxPayloadBytes,
    logger,
    headSkip,
  });
}
