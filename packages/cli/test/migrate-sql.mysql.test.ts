import { createMysqlStore } from '@asynccmd/adapter-mysql';
import mysql from 'mysql2/promise';
import { MYSQL_SERVER_URL } from '../../runtime/test/ops/databases.js';
import { describeMigrationSql } from './migrate-sql.suite.js';

const database = `cli_sql_${process.pid.toString(36)}`;

async function admin(sql: string): Promise<void> {
  const conn = await mysql.createConnection({ uri: MYSQL_SERVER_URL });
  try {
    await conn.query(sql);
  } finally {
    await conn.end();
  }
}

describeMigrationSql('MariaDB', async () => {
  await admin(`DROP DATABASE IF EXISTS ${database}`);
  await admin(`CREATE DATABASE ${database}`);
  const server = new URL(MYSQL_SERVER_URL);
  return {
    cliArgs: ['--db', `${MYSQL_SERVER_URL}/${database}`],
    shell: {
      command: 'mysql',
      args: ['-h', server.hostname, '-P', server.port, '-u', decodeURIComponent(server.username), database],
    },
    qualify: (t) => t,
    openStore: async () => createMysqlStore({ connection: `${MYSQL_SERVER_URL}/${database}` }),
    dispose: () => admin(`DROP DATABASE IF EXISTS ${database}`),
  };
});
