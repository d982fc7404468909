import { afterAll } from 'vitest';
import { PGlite } from '@electric-sql/pglite';
import type { Transaction } from '@electric-sql/pglite';
import { createPgliteStore } from '@asynccmd/adapter-pglite';
import type { PgliteCommandStore } from '@asynccmd/adapter-pglite';
import type { SqlExecutor } from '@asynccmd/core';
import { describeStoreConformance, type StoreHarness } from '@asynccmd/store-conformance';

/**
 * One in-memory PGlite for the file (it takes seconds and hundreds of MB to start); namespaces are
 * schemas on it, as on a PostgreSQL server. Every store (and every peer) is a store of its own on
 * that one database, as the instances of one process would be: PGlite has one session, so their
 * transactions take turns.
 */
let database: Promise<PGlite> | null = null;
const db = (): Promise<PGlite> => (database ??= PGlite.create());

afterAll(async () => {
  await (await database)?.close();
});

async function pgliteHarness(namespace: string): Promise<StoreHarness<Transaction>> {
  const unmigrated = `${namespace}_u`;
  const shared = await db();
  const opened: PgliteCommandStore[] = [];
  const open = async (schema: string, table?: string): Promise<PgliteCommandStore> => {
    const store = createPgliteStore({ db: shared, schema, table });
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
    sqlExecutor: transactionAsSqlExecutor,
    async dispose() {
      await Promise.all(opened.map((s) => s.close()));
      for (const schema of [namespace, unmigrated])
        await shared.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    },
  };
}

/** What an ORM bridge on PGlite hands the store: numbered parameters on the transaction, PGlite's own binding. */
function transactionAsSqlExecutor(tx: Transaction): SqlExecutor {
  return {
    kind: 'sql-executor',
    async run(strings, values) {
      const text = strings.reduce((sql, part, i) => `${sql}$${i}${part}`);
      return (await tx.query<Record<string, unknown>>(text, [...values])).rows;
    },
  };
}

// One session in this process: no other holds cleanup back, and nothing rides on a COMMIT.
describeStoreConformance('pglite', pgliteHarness, {
  wakeups: true,
  commitRiding: false,
  migrationScript: true,
  cleanupHorizon: false,
});
