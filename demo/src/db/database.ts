import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { createMysqlStore, type MysqlCommandStore } from '@asynccmd/adapter-mysql';
import { createPostgresStore, type PostgresCommandStore } from '@asynccmd/adapter-postgres';
import { configureConnection, createSqliteStore, type SqliteCommandStore } from '@asynccmd/adapter-sqlite';
import { InvalidArgumentError } from '@asynccmd/core';
import Database from 'better-sqlite3';
import mysql, { type Pool as MysqlPool, type PoolConnection as MysqlConnection } from 'mysql2/promise';
import pg from 'pg';
import type { TxSession } from '../domain/gateway.js';
import { migrateOrderSchema } from '../domain/schema.js';
import { sleep } from '../stats.js';
import { mysqlSession, postgresSession, sqliteSession, type Dialect, type SqlSession } from './sql.js';

/**
 * Where the demo keeps its orders and its command table, together: a SQLite file, a schema of a
 * PostgreSQL database, or a database of a MySQL / MariaDB server (MySQL's schemas are databases).
 */
export type DatabaseTarget =
  | { readonly dialect: 'sqlite'; readonly file: string }
  | { readonly dialect: 'postgres'; readonly url: string; readonly schema: string }
  | { readonly dialect: 'mysql'; readonly url: string; readonly schema: string };

export type ServerTarget = Extract<DatabaseTarget, { readonly url: string }>;

export type DemoStore = SqliteCommandStore | PostgresCommandStore | MysqlCommandStore;

/** A name this demo creates, drops and splices into DDL: plain lower-case, short enough for both servers. */
const NAME = /^[a-z_][a-z0-9_]{0,47}$/;

export function checkSchemaName(name: string): string {
  if (!NAME.test(name)) {
    throw new InvalidArgumentError(
      `schema name must be 1 to 48 characters of a-z, 0-9 and _, starting with a letter or _, not ${JSON.stringify(name)}`,
    );
  }
  return name;
}

/** A fresh name per run, so runs never meet each other's (or the tests') tables. */
export function generatedSchemaName(prefix = 'asynccmd_demo'): string {
  return checkSchemaName(`${prefix}_${Date.now().toString(36)}${randomBytes(3).toString('hex')}`);
}

/** Which database `--db` names: a postgres:// or mysql:// URL, or else a SQLite file path. */
export function dialectOf(db: string): Dialect {
  if (/^postgres(ql)?:\/\//i.test(db)) return 'postgres';
  if (/^(mysql|mariadb):\/\//i.test(db)) return 'mysql';
  return 'sqlite';
}

/** A server target whose tables live in `schema`; a SQLite target is the file itself. */
export function serverTarget(url: string, schema: string): ServerTarget {
  const dialect = dialectOf(url);
  if (dialect === 'sqlite') throw new InvalidArgumentError('expected a postgres:// or mysql:// URL');
  return { dialect, url, schema: checkSchemaName(schema) };
}

/** The URL without its password, for printing. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}

export function describeTarget(t: DatabaseTarget): string {
  if (t.dialect === 'sqlite') return `one SQLite file: ${t.file}`;
  const server = t.dialect === 'postgres' ? 'PostgreSQL' : 'MySQL/MariaDB';
  const where = t.dialect === 'postgres' ? 'schema' : 'database';
  return `one ${server} ${where}: ${t.schema} on ${redactUrl(t.url)}`;
}

/**
 * What to tell the user when opening `target` failed with a driver or system error (it carries a
 * `code`: ECONNREFUSED, a SQLSTATE, ER_…, SQLITE_…): the target and the code, never the driver's
 * text. Null for any other error, which is a bug to report as it is.
 */
export function openFailure(
  error: unknown,
  target: DatabaseTarget,
  what = describeTarget(target),
): string | null {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || code === '') return null;
  const hint =
    target.dialect === 'sqlite'
      ? ''
      : `: is the server running, and may this user create a ${target.dialect === 'mysql' ? 'database' : 'schema'} there?`;
  return `could not open ${what} (${code})${hint}`;
}

/**
 * Statements outside any transaction on the one SQLite connection the store shares. A store
 * transaction stays open across awaits (a transactional executor's, an order's): a statement sent
 * meanwhile would run inside it — read what it has not committed, be rolled back with it — so it
 * waits until none is open, as the store's own operations do.
 */
function autocommitSession(db: Database.Database): SqlSession {
  const inner = sqliteSession(db);
  const idle = async (): Promise<void> => {
    while (db.inTransaction) await sleep(1);
  };
  return {
    dialect: inner.dialect,
    all: async (sql, params) => {
      await idle();
      return inner.all(sql, params);
    },
    run: async (sql, params) => {
      await idle();
      return inner.run(sql, params);
    },
    insert: async (sql, params) => {
      await idle();
      return inner.insert(sql, params);
    },
  };
}

/** The MySQL URL with the target database as its path (mysql2 takes the database from the path). */
function mysqlUrlOf(url: string, database: string): string {
  const u = new URL(url.replace(/^mariadb:/i, 'mysql:'));
  u.pathname = `/${database}`;
  return u.toString();
}

/** The demo's database, open: the command store, and the order service's SQL on the same database. */
export interface DemoDatabase {
  readonly target: DatabaseTarget;
  readonly dialect: Dialect;
  readonly store: DemoStore;
  /** Autocommit statements (the pool, or the one SQLite connection). */
  readonly session: SqlSession;
  /** The order service's SQL on a transaction handle asynccmd handed out. */
  sessionOf(handle: unknown): TxSession;
  /** A store transaction without a runtime (the synchronous variant's). */
  transaction<T>(fn: (tx: TxSession) => Promise<T>): Promise<T>;
  /** Closes the store, then the connection(s). */
  close(): Promise<void>;
}

/**
 * Opens (creating when missing) the target's schema, the command table and the order tables. A
 * server target gets a pool of its own whose sessions see the schema's tables unqualified.
 */
export async function openDemoDatabase(target: DatabaseTarget): Promise<DemoDatabase> {
  if (target.dialect === 'sqlite') {
    const db = new Database(target.file);
    try {
      configureConnection(db);
      const store = createSqliteStore({ database: db });
      const session = autocommitSession(db);
      const sessionOf = (handle: unknown): TxSession => ({
        ...sqliteSession(handle as Database.Database),
        handle,
      });
      const transaction = <T>(fn: (tx: TxSession) => Promise<T>) =>
        store.transaction((tx) => fn(sessionOf(tx)));
      await migrateOrderSchema(session, transaction);
      await store.migrate();
      return {
        target,
        dialect: 'sqlite',
        store,
        session,
        sessionOf,
        transaction,
        close: async () => {
          await store.close();
          if (db.open) db.close();
        },
      };
    } catch (e) {
      if (db.open) db.close();
      throw e;
    }
  }
  if (target.dialect === 'postgres') {
    await withAdminPostgres(target.url, (c) => c.query(`CREATE SCHEMA IF NOT EXISTS ${target.schema}`));
    const sessionOptions = `-c search_path=${target.schema}`;
    // The order service's own statements outside a transaction (reads, the downstreams' ledger).
    const pool = new pg.Pool({ connectionString: target.url, max: 10, options: sessionOptions });
    pool.on('error', () => undefined);
    let store: PostgresCommandStore | null = null;
    try {
      // The store builds its pools as it would for any application: transactions (the orders'
      // included) on one, its claims and outcomes on another, so requests waiting for a connection
      // never hold up the commands. Its sessions, too, see the order tables unqualified.
      const own = (store = createPostgresStore({
        connection: { connectionString: target.url, max: 20, options: sessionOptions },
        schema: target.schema,
      }));
      const session = postgresSession(pool);
      const sessionOf = (handle: unknown): TxSession => ({
        ...postgresSession(handle as pg.PoolClient),
        handle,
      });
      const transaction = <T>(fn: (tx: TxSession) => Promise<T>) =>
        own.transaction((tx) => fn(sessionOf(tx)));
      await migrateOrderSchema(session, transaction);
      await own.migrate();
      return {
        target,
        dialect: 'postgres',
        store: own,
        session,
        sessionOf,
        transaction,
        close: async () => {
          await own.close();
          await pool.end();
        },
      };
    } catch (e) {
      await store?.close();
      await pool.end();
      throw e;
    }
  }
  await withAdminMysql(target.url, (c) => c.query(`CREATE DATABASE IF NOT EXISTS ${target.schema}`));
  const uri = mysqlUrlOf(target.url, target.schema);
  // The order service's own statements outside a transaction (reads, the downstreams' ledger).
  const pool = mysql.createPool({
    uri,
    connectionLimit: 10,
    supportBigNumbers: true,
    bigNumberStrings: true,
    dateStrings: true,
    timezone: 'Z',
    charset: 'UTF8MB4_GENERAL_CI',
  });
  let opened: MysqlCommandStore | null = null;
  try {
    // The store's own pools, as for any application: transactions (the orders' included) on one,
    // its claims on another.
    const store = (opened = createMysqlStore({ connection: uri, connectionLimit: 20 }));
    const session = mysqlSession(pool);
    const sessionOf = (handle: unknown): TxSession => ({
      ...mysqlSession(handle as MysqlConnection),
      handle,
    });
    const transaction = <T>(fn: (tx: TxSession) => Promise<T>) =>
      store.transaction((tx) => fn(sessionOf(tx)));
    // MySQL commits each CREATE TABLE by itself: no transaction to wrap them in.
    await migrateOrderSchema(session);
    await store.migrate();
    return {
      target,
      dialect: 'mysql',
      store,
      session,
      sessionOf,
      transaction,
      close: async () => {
        await store.close();
        await pool.end();
      },
    };
  } catch (e) {
    await opened?.close();
    await pool.end();
    throw e;
  }
}

/** Runs `fn` on a short-lived connection of the target's schema (to count rows from outside a server). */
export async function withTargetSession<T>(
  target: DatabaseTarget,
  fn: (s: SqlSession) => Promise<T>,
): Promise<T> {
  if (target.dialect === 'sqlite') {
    const db = new Database(target.file);
    try {
      db.pragma('busy_timeout = 5000');
      return await fn(sqliteSession(db));
    } finally {
      db.close();
    }
  }
  if (target.dialect === 'postgres') {
    const client = new pg.Client({
      connectionString: target.url,
      options: `-c search_path=${target.schema}`,
    });
    await client.connect();
    try {
      return await fn(postgresSession(client as unknown as pg.PoolClient));
    } finally {
      await client.end();
    }
  }
  const pool: MysqlPool = mysql.createPool({
    uri: mysqlUrlOf(target.url, target.schema),
    connectionLimit: 1,
    supportBigNumbers: true,
    bigNumberStrings: true,
  });
  try {
    return await fn(mysqlSession(pool));
  } finally {
    await pool.end();
  }
}

/** Removes the target: the SQLite file (and its WAL), the PostgreSQL schema, the MySQL database. */
export async function dropTarget(target: DatabaseTarget): Promise<void> {
  if (target.dialect === 'sqlite') {
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${target.file}${suffix}`, { force: true });
    return;
  }
  if (target.dialect === 'postgres') {
    await withAdminPostgres(target.url, (c) => c.query(`DROP SCHEMA IF EXISTS ${target.schema} CASCADE`));
    return;
  }
  await withAdminMysql(target.url, (c) => c.query(`DROP DATABASE IF EXISTS ${target.schema}`));
}

async function withAdminPostgres<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

async function withAdminMysql<T>(url: string, fn: (c: mysql.Connection) => Promise<T>): Promise<T> {
  const connection = await mysql.createConnection({ uri: url.replace(/^mariadb:/i, 'mysql:') });
  try {
    return await fn(connection);
  } finally {
    await connection.end();
  }
}
