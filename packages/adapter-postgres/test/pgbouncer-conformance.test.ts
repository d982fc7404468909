import { createPostgresStore } from '@asynccmd/adapter-postgres';
import type { PostgresCommandStore } from '@asynccmd/adapter-postgres';
import type { PoolClient } from 'pg';
import { afterAll } from 'vitest';
import { describeStoreConformance, type StoreHarness } from '@asynccmd/store-conformance';
import { PgBouncer } from '../../../test/pooler/pgbouncer.js';
import { adminQuery, clientAsSqlExecutor, DATABASE_URL } from './helpers.js';

/**
 * The conformance suite with every store reaching PostgreSQL through a PgBouncer of this file's
 * own in transaction pooling mode (a few server connections shared by all the stores, so
 * consecutive transactions of one store land on different server connections), the LISTEN
 * connection direct, as a user would configure it.
 */
let bouncer: Promise<PgBouncer> | null = null;
const started = (): Promise<PgBouncer> => (bouncer ??= PgBouncer.start({ poolSize: 8 }));
afterAll(async () => {
  if (bouncer) await (await bouncer).stop();
});

async function pgbouncerHarness(namespace: string): Promise<StoreHarness<PoolClient>> {
  const { url } = await started();
  const unmigrated = `${namespace}_u`;
  const opened: PostgresCommandStore[] = [];
  const open = async (schema: string, table?: string): Promise<PostgresCommandStore> => {
    const store = createPostgresStore({
      connection: url,
      pooler: 'transaction',
      listenConnection: DATABASE_URL,
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
      for (const schema of [namespace, unmigrated])
        await adminQuery(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    },
  };
}

// Its LISTEN connection is a direct one (listenConnection): wake-ups as without the pooler.
describeStoreConformance('postgres through PgBouncer (transaction pooling)', pgbouncerHarness, {
  wakeups: true,
  commitRiding: true,
  migrationScript: true,
  cleanupHorizon: true,
});
