import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore, type SqliteDatabase, type SqliteStoreOptions } from '@asynccmd/adapter-sqlite';
import type { CommandStore } from '@asynccmd/core';
import type { RuntimeHarnessFactory } from './harness.js';

/** One database file per test (WAL, so several connections and processes share it). */
export const sqliteRuntimeHarness: RuntimeHarnessFactory<SqliteDatabase> = async (namespace) => {
  const filename = join(tmpdir(), `asynccmd-e2e-${process.pid}-${namespace}.db`);
  const options: SqliteStoreOptions = { filename, table: `cmd_${namespace}` };
  const opened: CommandStore<SqliteDatabase>[] = [];
  return {
    async openStore() {
      const store = createSqliteStore(options);
      opened.push(store);
      await store.migrate();
      return store;
    },
    workerStore: {
      module: '@asynccmd/adapter-sqlite',
      factory: 'createSqliteStore',
      options: { ...options },
    },
    async dispose() {
      await Promise.all(opened.map((s) => s.close().catch(() => undefined)));
      await Promise.all(['', '-wal', '-shm'].map((suffix) => rm(filename + suffix, { force: true })));
    },
  };
};
