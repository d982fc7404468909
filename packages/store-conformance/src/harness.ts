import type { CommandStore } from '@asynccmd/core';

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
  /** Drops the namespace and closes everything the harness opened. */
  dispose(): Promise<void>;
}

/** Creates a fresh harness; `namespace` is unique per describe block and a valid identifier. */
export type StoreHarnessFactory<Tx = unknown> = (namespace: string) => Promise<StoreHarness<Tx>>;
