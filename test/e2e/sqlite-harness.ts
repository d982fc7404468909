import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore, type SqliteDatabase, type SqliteStoreOptions } from '@asynccmd/adapter-sqlite';
import { openedStores, type RuntimeHarnessFactory } from './harness.js';

/** One database file per test (WAL, so several connections and processes share it). */
export const sqliteRuntimeHarness: RuntimeHarnessFactory<SqliteDatabase> = async (namespace) => {
  const filename = join(tmpdir(), `asynccmd-e2e-${process.pid}-${namespace}.db`);
  const options: SqliteStoreOptions = { filename, table: `cmd_${namespace}` };
  const stores = openedStores(() => createSqliteStore(options));
  return {
    openStore: stores.openStore,
    cliArgs: ['--db', `sqlite:${filename}`, '--table', `cmd_${namespace}`],
    workerStore: {
      module: '@asynccmd/adapter-sqlite',
      factory: 'createSqliteStore',
      options: { ...options },
    },
    async dispose() {
      await stores.closeAll();
      await Promise.all(['', '-wal', '-shm'].map((suffix) => rm(filename + suffix, { force: true })));
    },
  };
};
