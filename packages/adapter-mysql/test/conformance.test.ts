import { createMysqlStore } from '@asynccmd/adapter-mysql';
import type { ClaimStrategyName, MysqlCommandStore } from '@asynccmd/adapter-mysql';
import { createConnection } from 'mysql2/promise';
import type { Connection } from 'mysql2/promise';
import {
  describeStoreConformance,
  type StoreHarness,
  type StoreHarnessFactory,
} from '@asynccmd/store-conformance';

/** A MySQL 8 / MariaDB server URI without a database; this machine's MariaDB 10.11 by default. */
const SERVER = process.env.ASYNCCMD_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306';

async function onServer(statements: readonly string[]): Promise<void> {
  const admin = await createConnection(SERVER);
  try {
    for (const sql of statements) await admin.query(sql);
  } finally {
    await admin.end();
  }
}

/**
 * MySQL namespaces are databases: every store (and every peer) has its own small pool on the
 * namespace's database, as separate instances would; dispose drops the databases. One harness per
 * claim strategy, so the SKIP LOCKED claim and the legacy derived-table claim both pass the suite.
 */
function mysqlHarness(
  claimStrategy: ClaimStrategyName,
  slowHeadSkip?: { readonly slowMs: number },
): StoreHarnessFactory<Connection> {
  return async (namespace: string): Promise<StoreHarness<Connection>> => {
    const unmigrated = `${namespace}_u`;
    await onServer([
      `CREATE DATABASE \`${namespace}\` CHARACTER SET utf8mb4`,
      `CREATE DATABASE \`${unmigrated}\` CHARACTER SET utf8mb4`,
    ]);
    const opened: MysqlCommandStore[] = [];
    const open = async (database: string, table?: unknown): Promise<MysqlCommandStore> => {
      const store = await createMysqlStore({
        connection: `${SERVER}/${database}`,
        connectionLimit: 4,
        claimStrategy,
        ...(slowHeadSkip === undefined ? {} : { slowHeadSkip }),
        ...(table === undefined ? {} : { table: table as string }),
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
      openWithTable: (table) => open(namespace, table),
      // What an ORM bridge hands the store, without an ORM: `?` parameters on the transaction's connection.
      sqlExecutor: (connection) => ({
        kind: 'sql-executor',
        async run(strings, values) {
          const [rows] = await connection.query(strings.join('?'), [...values]);
          return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : [];
        },
      }),
      async dispose() {
        await Promise.all(opened.map((s) => s.close()));
        await onServer([
          `DROP DATABASE IF EXISTS \`${namespace}\``,
          `DROP DATABASE IF EXISTS \`${unmigrated}\``,
        ]);
      },
    };
  };
}

/** MySQL and MariaDB: wake-ups by a probe of the highest id, no commit riding. */
const MYSQL_CAPABILITIES = {
  wakeups: true,
  commitRiding: false,
  migrationScript: true,
  cleanupHorizon: true,
};

describeStoreConformance('mysql', mysqlHarness('skip-locked'), MYSQL_CAPABILITIES);
describeStoreConformance('mysql-legacy', mysqlHarness('legacy'), MYSQL_CAPABILITIES);
// Every claim from the head counts as slow (slowMs 0): the claims after each store's first read
// their candidates without locks (sql.ts lockDueUnlocked), so that path passes the suite too.
describeStoreConformance(
  'mysql-unlocked-candidates',
  mysqlHarness('skip-locked', { slowMs: 0 }),
  MYSQL_CAPABILITIES,
);
