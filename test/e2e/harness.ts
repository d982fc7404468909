import type { CommandStore } from '@asynccmd/core';

/** How a child process (test/e2e/worker.mjs) opens the same store: `(await import(module))[factory](options)`. */
export interface WorkerStoreSpec {
  readonly module: string;
  readonly factory: string;
  readonly options: Record<string, unknown>;
}

/**
 * What an adapter hands the end-to-end suite. One factory per adapter and one line per adapter's
 * test file: `describeRuntimeE2E('sqlite', sqliteRuntimeHarness)`.
 */
export interface RuntimeHarness<Tx = unknown> {
  /** A migrated store on this harness's namespace, over its own connection(s), as an instance would open it. */
  openStore(): Promise<CommandStore<Tx>>;
  /** How a worker process opens a store on the same namespace. */
  readonly workerStore: WorkerStoreSpec;
  /** The `asynccmd` arguments that reach the same namespace: `--db URL` and `--schema` or `--table`. */
  readonly cliArgs: readonly string[];
  /**
   * Drops every server connection of this namespace, as a database restart or a network cut would
   * (present only where there are connections to lose: not on embedded SQLite).
   */
  interruptConnections?(): Promise<void>;
  /**
   * Makes the namespace unreachable (every store call fails) until the returned function is called:
   * an outage longer than a blip, without stopping a server other tests share.
   */
  blackout?(): Promise<() => Promise<void>>;
  /** Closes what the harness opened and drops the namespace. */
  dispose(): Promise<void>;
}

/** `namespace` is unique per test and a valid identifier. */
export type RuntimeHarnessFactory<Tx = unknown> = (namespace: string) => Promise<RuntimeHarness<Tx>>;

/** Opens migrated stores with `open` and closes all of them at dispose: the part every harness shares. */
export function openedStores<Tx>(open: () => CommandStore<Tx>): {
  openStore(): Promise<CommandStore<Tx>>;
  closeAll(): Promise<void>;
} {
  const opened: CommandStore<Tx>[] = [];
  return {
    async openStore() {
      const store = open();
      opened.push(store);
      await store.migrate();
      return store;
    },
    async closeAll() {
      await Promise.all(opened.map((s) => s.close().catch(() => undefined)));
    },
  };
}
