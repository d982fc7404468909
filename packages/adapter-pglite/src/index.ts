import { requireInt, silentLogger } from '@asynccmd/core';
import type * as Port from '@asynccmd/core';
import { PostgresEngine, postgresEngineStore, tableNames } from '@asynccmd/adapter-postgres/engine';
import { PGlite } from '@electric-sql/pglite';
import type { PGliteInterface, Transaction } from '@electric-sql/pglite';
import { PgliteConnection } from './connection.js';
import { PgliteWakeups } from './wakeups.js';

export type { PgliteWakeups } from './wakeups.js';

export interface PgliteStoreOptions {
  /** A PGlite database to run on; the store never closes it. Other stores may share it. */
  readonly db?: PGliteInterface;
  /**
   * Or where the store opens (and on close closes) a PGlite of its own: a directory (created with
   * a new database when missing), or 'memory://' for one that lives as long as the store. Default
   * 'memory://'.
   */
  readonly dataDir?: string;
  /** Default 'public'; created by migrate() when missing. */
  readonly schema?: string;
  /** Default 'async_command'. */
  readonly table?: string;
  /** Largest payload accepted, in UTF-8 bytes of its JSON. Default core DEFAULT_MAX_PAYLOAD_BYTES (64 KiB). */
  readonly maxPayloadBytes?: number;
  /** Coalescing window of wake-up NOTIFYs, in ms: at most one per window per store. Default 5. */
  readonly wakeupWindowMs?: number;
  readonly logger?: Port.Logger;
}

/** The store port on PGlite, with its database and table. */
export type PgliteCommandStore = Port.CommandStore<Transaction> &
  Required<Pick<Port.CommandStore<Transaction>, 'migrationScript' | 'wakeups' | 'revocations'>> & {
    /** The database the store runs on. */
    readonly db: PGliteInterface;
    /** The schema-qualified, quoted table name, e.g. `"public"."async_command"`. */
    readonly table: string;
  };

/**
 * A command store on PGlite: PostgreSQL's engine (@asynccmd/adapter-postgres/engine, the same SQL
 * and migrations) on one in-process database. Validates `schema` and `table` (core
 * InvalidIdentifierError for a hostile name); call `migrate()` before use.
 */
export function createPgliteStore(options: PgliteStoreOptions = {}): PgliteCommandStore {
  const names = tableNames(
    options.schema === undefined ? 'public' : options.schema,
    options.table === undefined ? 'async_command' : options.table,
  );
  const windowMs = requireInt('wakeupWindowMs', options.wakeupWindowMs ?? 5, 0);
  const logger = options.logger ?? silentLogger;
  const db = options.db ?? new PGlite(options.dataDir ?? 'memory://');
  const engine = new PostgresEngine<Transaction>({
    connection: new PgliteConnection(db, options.db === undefined),
    names,
    wakeups: new PgliteWakeups(db, { channel: names.channel, windowMs, logger }),
    maxPayloadBytes: options.maxPayloadBytes,
    dialect: 'pglite',
    // One session: no other transaction, snapshot or replication slot can hold the cleanup back.
    cleanupHorizon: false,
  });
  const store = postgresEngineStore<
    Transaction,
    PostgresEngine<Transaction>,
    { db: PGliteInterface; table: string }
  >(engine, options.maxPayloadBytes, { db, table: engine.table });
  return store as PgliteCommandStore;
}
