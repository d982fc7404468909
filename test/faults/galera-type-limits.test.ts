import { createMysqlStore, type MysqlStoreOptions } from '@asynccmd/adapter-mysql';
import { createConnection, type Connection } from 'mysql2/promise';
import { afterAll } from 'vitest';
import { openedStores, type RuntimeHarnessFactory } from '../e2e/harness.js';
import { describeTypeLimitE2E } from '../e2e/type-limits-suite.js';
import { startGaleraCluster, type GaleraCluster } from './galera.js';

/**
 * The type-limit end-to-end test on a three-node MariaDB Galera cluster, the workers spread over the
 * nodes. Galera's row locks bind one node only: two nodes' claims of a limited type must meet at
 * certification (the limited claim writes its type's row), or both would count the same RUNNING
 * commands and together pass the limit.
 */
let cluster: Promise<GaleraCluster> | null = null;
const started = (): Promise<GaleraCluster> => (cluster ??= startGaleraCluster(3));
afterAll(async () => {
  await (await cluster)?.dispose();
}, 60_000);

const url = (port: number, database = ''): string => `mysql://root@127.0.0.1:${port}/${database}`;
let database = '';
let ports: readonly number[] = [];

async function admin(port: number, sql: string): Promise<void> {
  const conn: Connection = await createConnection(url(port));
  try {
    await conn.query(sql);
  } finally {
    await conn.end();
  }
}

const galeraHarness: RuntimeHarnessFactory<Connection> = async (namespace) => {
  ports = (await started()).ports;
  database = namespace;
  await admin(ports[0]!, `CREATE DATABASE \`${namespace}\` CHARACTER SET utf8mb4`);
  const options: MysqlStoreOptions = { connection: url(ports[0]!, namespace), connectionLimit: 4 };
  const stores = openedStores(() => createMysqlStore(options));
  return {
    openStore: stores.openStore,
    cliArgs: ['--db', url(ports[0]!, namespace)],
    workerStore: { module: '@asynccmd/adapter-mysql', factory: 'createMysqlStore', options: { ...options } },
    async dispose() {
      await stores.closeAll();
      await admin(ports[0]!, `DROP DATABASE IF EXISTS \`${namespace}\``);
    },
  };
};

describeTypeLimitE2E('a MariaDB Galera cluster (workers spread over 3 nodes)', galeraHarness, {
  inserted: 100,
  submittedPerWorker: 25,
  workers: 4,
  limit: 3,
  workerStoreFor: (w) => ({
    module: '@asynccmd/adapter-mysql',
    factory: 'createMysqlStore',
    options: { connection: url(ports[w % ports.length]!, database), connectionLimit: 4 },
  }),
});
