import type { CommandStore, SqlExecutor } from '@asynccmd/core';

/**
 * What an adapter hands the conformance suite. One factory per adapter, one line per adapter's
 * test file: `describeStoreConformance('postgres', postgresHarness)`.
 */
export interface StoreHarness<Tx = unknown> {
  /** A migrated store on a namespace (schema / database / table prefix) no other test file uses. */
  readonly store: CommandStore<Tx>;
  /**
   * Opens another store on the same namespace over its own connection(s), as a second instance
   * would; the suite closes it.
   */
  openPeer(): Promise<CommandStore<Tx>>;
  /**
   * Opens a store on a second namespace derived from this one that nothing has migrated yet; every
   * call opens another connection to that same namespace, so the suite can race `migrate()` from
   * several instances. `dispose()` drops it too.
   */
  openUnmigrated(): Promise<CommandStore<Tx>>;
  /**
   * Opens a store configured with `table` as its table name (or prefix) on this harness's database.
   * Must reject with an INVALID_IDENTIFIER error, before any SQL runs, when `table` is not a plain
   * identifier; the suite passes hostile names and checks nothing was touched.
   */
  openWithTable(table: unknown): Promise<CommandStore<Tx>>;
  /**
   * Where the store takes an SqlExecutor (`capabilities.sqlExecutor`, or a transactional completion
   * `throughSqlExecutor`): wraps a transaction of the store's own `transaction()` as one, binding
   * values as the driver's parameters, the way an ORM bridge wraps its ORM's transaction.
   */
  readonly sqlExecutor?: (tx: Tx) => SqlExecutor;
  /** Drops the namespace and closes everything the harness opened. */
  dispose(): Promise<void>;
}

/**
 * What the store offers of the capabilities a store may lack, as its adapter declares them: each
 * declared one's area of the suite runs, and for each other one a test checks that the store says
 * it lacks it (a gap in the report, never a silent skip).
 */
export interface StoreCapabilityDeclaration {
  /** `capabilities.wakeups`: another instance's submit and `notify()` wake this one's subscribers. */
  readonly wakeups: boolean;
  /** `capabilities.commitRiding`: a claim by id and the wake-up ride on a store transaction's COMMIT. */
  readonly commitRiding: boolean;
  /** `store.migrationScript`: the DDL `migrate()` would run, as text. */
  readonly migrationScript: boolean;
  /** `store.cleanupHorizon`: what holds the database's cleanup of dead rows back. */
  readonly cleanupHorizon: boolean;
}

/** Creates a fresh harness; `namespace` is unique per describe block and a valid identifier. */
export type StoreHarnessFactory<Tx = unknown> = (namespace: string) => Promise<StoreHarness<Tx>>;
