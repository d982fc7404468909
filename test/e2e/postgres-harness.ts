import { createPostgresStore, type PostgresStoreOptions } from '@asynccmd/adapter-postgres';
import pg from 'pg';
import { openedStores, type RuntimeHarnessFactory } from './harness.js';

const DATABASE_URL = process.env.ASYNCCMD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function admin(sql: string, values: unknown[] = []): Promise<void> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query(sql, values);
  } finally {
    await client.end();
  }
}

/** One schema per test, dropped afterwards. */
export const postgresRuntimeHarness: RuntimeHarnessFactory<pg.ClientBase> = async (namespace) => {
  const options: PostgresStoreOptions = {
    connectionString: DATABASE_URL,
    schema: namespace,
    // Tags this test's sessions so interruptConnections() kills only them.
    poolConfig: { max: 4, application_name: namespace },
  };
  const stores = openedStores(() => createPostgresStore(options));
  return {
    openStore: stores.openStore,
    cliArgs: ['--db', DATABASE_URL, '--schema', namespace],
    workerStore: {
      module: '@asynccmd/adapter-postgres',
      factory: 'createPostgresStore',
      options: { ...options },
    },
    async interruptConnections() {
      await admin('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [
        namespace,
      ]);
    },
    async blackout() {
      await admin(`ALTER SCHEMA "${namespace}" RENAME TO "${namespace}_away"`);
      return () => admin(`ALTER SCHEMA "${namespace}_away" RENAME TO "${namespace}"`);
    },
    async dispose() {
      await stores.closeAll();
      await admin(`DROP SCHEMA IF EXISTS "${namespace}" CASCADE`);
      await admin(`DROP SCHEMA IF EXISTS "${namespace}_away" CASCADE`);
    },
  };
};
