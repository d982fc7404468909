import { createConnection, createPool } from 'mysql2/promise';
import type { Pool } from 'mysql2/promise';
import type { MysqlStoreOptions } from '../src/index.js';
import { createMysqlStore } from '../src/index.js';
import type { MysqlCommandStore } from '../src/store.js';

/** The MariaDB of this machine; MYSQL_URL overrides it (a server URI without a database). */
export const SERVER = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306';

/** Runs admin statements (CREATE / DROP DATABASE, KILL) on a short-lived connection of its own. */
export async function admin<T>(
  fn: (conn: Awaited<ReturnType<typeof createConnection>>) => Promise<T>,
): Promise<T> {
  const conn = await createConnection(SERVER);
  try {
    return await fn(conn);
  } finally {
    await conn.end();
  }
}

/** A database name of this process's own: two checkouts running one file at once never share it. */
export function perProcess(base: string): string {
  return `${base}_${process.pid.toString(36)}`;
}

/** A fresh database for one test file: created empty, dropped by the returned function. */
export async function freshDatabase(name: string): Promise<{ url: string; drop: () => Promise<void> }> {
  await admin(async (c) => {
    await c.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await c.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`);
  });
  return {
    url: `${SERVER}/${name}`,
    drop: () => admin(async (c) => void (await c.query(`DROP DATABASE IF EXISTS \`${name}\``))),
  };
}

export async function openStore(
  url: string,
  options: Omit<MysqlStoreOptions, 'connection' | 'pool'> = {},
): Promise<MysqlCommandStore> {
  const store = await createMysqlStore({ connection: url, connectionLimit: 4, ...options });
  await store.migrate();
  return store;
}

/**
 * A caller's pool with mysql2's default options whose every connection first runs `statement`
 * (queued ahead of anything the pool hands it out for): a session the store did not configure.
 */
export function poolWithSession(url: string, statement: string, connectionLimit = 2): Pool {
  const pool = createPool({ uri: url, connectionLimit });
  pool.on('connection', (conn) => {
    void (conn as unknown as { query(sql: string): unknown }).query(statement);
  });
  return pool;
}

/** A derived table of the digits 0–9 (`d`): n of them cross-joined make 10ⁿ rows in one statement. */
export const DIGITS =
  'SELECT 0 AS d UNION ALL ' + Array.from({ length: 9 }, (_, i) => `SELECT ${i + 1}`).join(' UNION ALL ');

/** The rows and index entries `conn`'s session has read so far (InnoDB handler counters). */
export async function handlerReads(conn: { query(sql: string): Promise<unknown> }): Promise<number> {
  const [rows] = (await conn.query("SHOW SESSION STATUS LIKE 'Handler_read%'")) as [{ Value: string }[]];
  return rows.reduce((sum, r) => sum + Number(r.Value), 0);
}
