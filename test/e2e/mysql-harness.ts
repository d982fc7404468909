import { createMysqlStore, type MysqlStoreOptions } from '@asynccmd/adapter-mysql';
import { createConnection, type Connection } from 'mysql2/promise';
import { openedStores, type RuntimeHarnessFactory } from './harness.js';

const SERVER = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306';

async function admin<T = unknown>(sql: string, values: unknown[] = []): Promise<T> {
  const conn = await createConnection(SERVER);
  try {
    const [rows] = await conn.query(sql, values);
    return rows as T;
  } finally {
    await conn.end();
  }
}

/** One database per test, dropped afterwards. */
export const mysqlRuntimeHarness: RuntimeHarnessFactory<Connection> = async (namespace) => {
  await admin(`DROP DATABASE IF EXISTS \`${namespace}\``);
  await admin(`CREATE DATABASE \`${namespace}\` CHARACTER SET utf8mb4`);
  const options: MysqlStoreOptions = { connection: `${SERVER}/${namespace}`, connectionLimit: 4 };
  const stores = openedStores(() => createMysqlStore(options));
  return {
    openStore: stores.openStore,
    cliArgs: ['--db', `${SERVER}/${namespace}`],
    workerStore: { module: '@asynccmd/adapter-mysql', factory: 'createMysqlStore', options: { ...options } },
    async interruptConnections() {
      const sessions = await admin<{ id: number }[]>(
        'SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()',
        [namespace],
      );
      for (const { id } of sessions) await admin(`KILL ${Number(id)}`).catch(() => undefined);
    },
    async blackout() {
      await admin(`RENAME TABLE \`${namespace}\`.async_command TO \`${namespace}\`.async_command_away`);
      return () =>
        admin(`RENAME TABLE \`${namespace}\`.async_command_away TO \`${namespace}\`.async_command`);
    },
    async dispose() {
      await stores.closeAll();
      await admin(`DROP DATABASE IF EXISTS \`${namespace}\``);
    },
  };
};
