import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import type { SqliteDatabase } from '@asynccmd/adapter-sqlite';
import type { CommandStore } from '@asynccmd/core';
import { describeStoreConformance, type StoreHarness } from '@asynccmd/store-conformance';

/**
 * SQLite namespaces are files in a fresh temporary directory: every store (and every peer) opens
 * its own connection to the file, as separate instances would.
 */
async function sqliteHarness(namespace: string): Promise<StoreHarness<SqliteDatabase>> {
  const dir = mkdtempSync(join(tmpdir(), `asynccmd-${namespace}-`));
  const file = join(dir, 'commands.db');
  const opened: CommandStore<SqliteDatabase>[] = [];
  const open = async (filename: string, table?: string): Promise<CommandStore<SqliteDatabase>> => {
    const store = createSqliteStore({ filename, table });
    opened.push(store);
    return store;
  };
  const store = await open(file);
  await store.migrate();
  return {
    store,
    openPeer: () => open(file),
    openUnmigrated: () => open(join(dir, 'unmigrated.db')),
    openWithTable: (table) => open(file, table as string),
    // What an ORM bridge hands the store, without an ORM: `?` parameters on the store's connection.
    sqlExecutor: (db) => ({
      kind: 'sql-executor',
      async run(strings, values) {
        const statement = db.prepare(strings.join('?'));
        if (statement.reader) return statement.all(...values) as Record<string, unknown>[];
        statement.run(...values);
        return [];
      },
    }),
    async dispose() {
      await Promise.all(opened.map((s) => s.close()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describeStoreConformance('sqlite', sqliteHarness, {
  wakeups: true,
  commitRiding: false,
  migrationScript: true,
  cleanupHorizon: false,
});
