import { createMysqlStore } from '@asynccmd/adapter-mysql';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { createPostgresStore } from '@asynccmd/adapter-postgres';
import mysql from 'mysql2/promise';
import pg from 'pg';
import type { OpsDatabase } from './admin-http.suite.js';
import { openTempSqlite } from './support.js';

/** The real databases the ops suites run on; each test file passes its own namespace. */

/** Two checkouts running the same file at once must not share a schema or database. */
const perProcess = (base: string): string => `${base}_${process.pid.toString(36)}`;

export const POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
export const MYSQL_SERVER_URL = 'mysql://root@127.0.0.1:3306';

export async function openSqlite(): Promise<OpsDatabase> {
  const db = await openTempSqlite();
  return {
    ...db,
    cliArgs: [],
    unreachable: async () => {
      const closed = createSqliteStore({ filename: db.file });
      await closed.close();
      return closed;
    },
  };
}

/** Drops a PostgreSQL schema and what it holds, if it is there. */
export async function dropPostgresSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await client.end();
  }
}

/** A migrated store in its own PostgreSQL schema, dropped first and on dispose. */
export async function openPostgres(base: string): Promise<OpsDatabase> {
  const schema = perProcess(base);
  const dropSchema = () => dropPostgresSchema(schema);
  await dropSchema();
  const store = createPostgresStore({ connectionString: POSTGRES_URL, schema });
  await store.migrate();
  return {
    store,
    url: POSTGRES_URL,
    cliArgs: ['--schema', schema],
    // Nothing listens on port 1: every query fails with a real connection error.
    unreachable: async () =>
      createPostgresStore({
        connectionString: 'postgres://postgres@127.0.0.1:1/test',
        schema,
      }),
    dispose: async () => {
      await store.close().catch(() => undefined);
      await dropSchema();
    },
  };
}

/** A migrated store in its own MariaDB database, dropped first and on dispose. */
export async function openMysql(base: string): Promise<OpsDatabase> {
  const database = perProcess(base);
  const run = async (sql: string) => {
    const conn = await mysql.createConnection({ uri: MYSQL_SERVER_URL });
    try {
      await conn.query(sql);
    } finally {
      await conn.end();
    }
  };
  await run(`DROP DATABASE IF EXISTS ${database}`);
  await run(`CREATE DATABASE ${database}`);
  const url = `${MYSQL_SERVER_URL}/${database}`;
  const store = await createMysqlStore({ connection: url });
  await store.migrate();
  return {
    store,
    url,
    cliArgs: [],
    unreachable: async () => {
      const closed = await createMysqlStore({ connection: url });
      await closed.close();
      return closed;
    },
    dispose: async () => {
      await store.close().catch(() => undefined);
      await run(`DROP DATABASE IF EXISTS ${database}`);
    },
  };
}
