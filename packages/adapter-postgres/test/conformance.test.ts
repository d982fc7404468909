import { createPostgresStore } from '@asynccmd/adapter-postgres';
import type { PostgresCommandStore } from '@asynccmd/adapter-postgres';
import pg from 'pg';
import type { PoolClient } from 'pg';
import { describeStoreConformance, type StoreHarness } from '@asynccmd/store-conformance';
import { clientAsSqlExecutor } from './helpers.js';

const DATABASE_URL = process.env.ASYNCCMD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * PostgreSQL namespaces are schemas: every store (and every peer) has its own small pool on the
 * namespace's schema, as separate instances would; dispose drops the schemas.
 */
async function postgresHarness(namespace: string): Promise<StoreHarness<PoolClient>> {
  const unmigrated = `${namespace}_u`;
  const opened: PostgresCommandStore[] = [];
  const open = async (schema: string, table?: string): Promise<PostgresCommandStore> => {
    const store = createPostgresStore({
      connectionString: DATABASE_URL,
      poolConfig: { max: 4 },
      schema,
      table,
    });
    opened.push(store);
    return store;
  };
  const store = await open(namespace);
  await store.migrate();
  return {
    store,
    openPeer: () => open(namespace),
    openUnmigrated: () => open(unmigrated),
    openWithTable: (table) => open(namespace, table as string),
    sqlExecutor: clientAsSqlExecutor,
    async dispose() {
      await Promise.all(opened.map((s) => s.close()));
      const admin = new pg.Client({ connectionString: DATABASE_URL });
      admin.on('error', () => undefined);
      await admin.connect();
      try {
        for (const schema of [namespace, unmigrated])
          await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      } finally {
        await admin.end();
      }
    },
  };
}

describeStoreConformance('postgres', postgresHarness, {
  wakeups: true,
  commitRiding: true,
  migrationScript: true,
  cleanupHorizon: true,
});
