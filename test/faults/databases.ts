import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CommandStore } from '@asynccmd/core';
import { createMysqlStore } from '@asynccmd/adapter-mysql';
import { createPostgresStore } from '@asynccmd/adapter-postgres';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import Database from 'better-sqlite3';
import { createConnection } from 'mysql2/promise';
import pg from 'pg';

/** How a worker process opens its store: `(await import(module))[factory](options)`. */
export interface WorkerStoreSpec {
  readonly module: string;
  readonly factory: string;
  readonly options: Record<string, unknown>;
}

/** One namespace (schema, database or file) on one database, for one scenario run. */
export interface FaultTarget {
  /** A migrated store over direct connections, for the test itself (submits and the final check). */
  readonly store: CommandStore;
  /** The store a worker opens; `port` routes it through a proxy on 127.0.0.1 instead of the server. */
  workerStore(port?: number): WorkerStoreSpec;
  /**
   * SQLite only: whether another connection holds the database's one write lock right now (a
   * `BEGIN IMMEDIATE` with no busy wait is refused). Never blocks the caller.
   */
  writeLocked?(): boolean;
  dispose(): Promise<void>;
}

/** Where a namespace lives: the shared server unless `port` names a server of the suite's own. */
export interface OpenOptions {
  /** A temporary server on 127.0.0.1 (see temp-servers.ts) instead of the shared one. */
  readonly port?: number;
  /** Extra store options, for the test's store and the workers' alike. */
  readonly store?: Record<string, unknown>;
}

export interface FaultDatabase {
  readonly name: 'postgres' | 'mysql' | 'sqlite';
  /** The server's TCP address (none for embedded SQLite). */
  readonly server?: { readonly host: string; readonly port: number };
  open(namespace: string, on?: OpenOptions): Promise<FaultTarget>;
}

const PG_URL = new URL(process.env.ASYNCCMD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
const MYSQL_URL = new URL(process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306');

function withPort(url: URL, port: number | undefined, path?: string): string {
  const copy = new URL(url.href);
  if (port !== undefined) {
    copy.hostname = '127.0.0.1';
    copy.port = String(port);
  }
  if (path !== undefined) copy.pathname = `/${path}`;
  return copy.href;
}

export async function pgAdmin(sql: string, url: URL = PG_URL): Promise<void> {
  const client = new pg.Client({ connectionString: url.href });
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function mysqlAdmin(sql: string, url: URL = MYSQL_URL): Promise<void> {
  const conn = await createConnection(url.href);
  try {
    await conn.query(sql);
  } finally {
    await conn.end();
  }
}

export const postgres: FaultDatabase = {
  name: 'postgres',
  server: { host: PG_URL.hostname, port: Number(PG_URL.port || 5432) },
  async open(namespace, on = {}) {
    const base =
      on.port === undefined ? PG_URL : new URL(`postgres://postgres@127.0.0.1:${on.port}/postgres`);
    if (on.port !== undefined) await pgAdmin(`CREATE SCHEMA "${namespace}"`, base);
    const options = (port?: number) => ({
      ...on.store,
      connectionString: withPort(base, port),
      schema: namespace,
      poolConfig: { max: 4, application_name: namespace },
      // A LISTEN connection lost in a cut comes back quickly.
      listenReconnectMinMs: 50,
      listenReconnectMaxMs: 500,
    });
    const store = createPostgresStore(options());
    await store.migrate();
    return {
      store,
      workerStore: (port) => ({
        module: '@asynccmd/adapter-postgres',
        factory: 'createPostgresStore',
        options: options(port),
      }),
      async dispose() {
        await store.close().catch(() => undefined);
        await pgAdmin(`DROP SCHEMA IF EXISTS "${namespace}" CASCADE`, base);
      },
    };
  },
};

export const mysql: FaultDatabase = {
  name: 'mysql',
  server: { host: MYSQL_URL.hostname, port: Number(MYSQL_URL.port || 3306) },
  async open(namespace, on = {}) {
    const base = on.port === undefined ? MYSQL_URL : new URL(`mysql://root@127.0.0.1:${on.port}`);
    await mysqlAdmin(`CREATE DATABASE \`${namespace}\` CHARACTER SET utf8mb4`, base);
    // A small pool unless the scenario's store options say otherwise (undefined: the default).
    const options = (port?: number) => ({
      connectionLimit: 4,
      ...on.store,
      connection: withPort(base, port, namespace),
    });
    const store = createMysqlStore(options());
    await store.migrate();
    return {
      store,
      workerStore: (port) => ({
        module: '@asynccmd/adapter-mysql',
        factory: 'createMysqlStore',
        options: options(port),
      }),
      async dispose() {
        await store.close().catch(() => undefined);
        await mysqlAdmin(`DROP DATABASE IF EXISTS \`${namespace}\``, base);
      },
    };
  },
};

export const sqlite: FaultDatabase = {
  name: 'sqlite',
  async open(namespace) {
    const filename = join(tmpdir(), `asynccmd-faults-${namespace}.db`);
    const options = { filename };
    const store = createSqliteStore(options);
    await store.migrate();
    let probe: Database.Database | null = null;
    return {
      store,
      workerStore: () => ({ module: '@asynccmd/adapter-sqlite', factory: 'createSqliteStore', options }),
      writeLocked() {
        probe ??= new Database(filename, { timeout: 0 });
        try {
          probe.exec('BEGIN IMMEDIATE');
          probe.exec('ROLLBACK');
          return false;
        } catch (error) {
          if ((error as { code?: unknown }).code === 'SQLITE_BUSY') return true;
          throw error;
        }
      },
      async dispose() {
        probe?.close();
        await store.close().catch(() => undefined);
        await Promise.all(['', '-wal', '-shm'].map((suffix) => rm(filename + suffix, { force: true })));
      },
    };
  },
};
