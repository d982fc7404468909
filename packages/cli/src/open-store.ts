import { InvalidArgumentError, type CommandStore } from '@asynccmd/core';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { CliFailure, EXIT_FAILED } from './failures.js';

const CONNECT_TIMEOUT_MS = 10_000;

export interface StoreLocation {
  /** `sqlite:path`, `postgres://…` (or postgresql://), `mysql://…` (or mariadb://). */
  readonly url: string;
  readonly table?: string;
  /** PostgreSQL schema. */
  readonly schema?: string;
  /** Refuse to create a SQLite file that is not there (every command but migrate). */
  readonly mustExist?: boolean;
  /** Connections the PostgreSQL or MySQL pool may open. Default 2: one CLI command needs one. */
  readonly poolSize?: number;
  /** PostgreSQL: `transaction` when the URL reaches a transaction pooler (PgBouncer and the like). */
  readonly pooler?: string;
  /** PostgreSQL: a direct connection URL for LISTEN (wake-ups) when the URL is a transaction pooler. */
  readonly listenUrl?: string;
}

const POOLER_MODES = ['none', 'transaction'] as const;

/** The adapter package of each database, and the driver package it imports. */
const ADAPTERS = {
  sqlite: { database: 'SQLite', adapter: '@asynccmd/adapter-sqlite', driver: 'better-sqlite3' },
  postgres: { database: 'PostgreSQL', adapter: '@asynccmd/adapter-postgres', driver: 'pg' },
  mysql: { database: 'MySQL/MariaDB', adapter: '@asynccmd/adapter-mysql', driver: 'mysql2' },
} as const;

type AdapterPackage = (typeof ADAPTERS)[keyof typeof ADAPTERS];

/**
 * Opens the store a database URL names. Adapters are imported on demand, so `asynccmd` against
 * SQLite never loads pg or mysql2, and only the adapter of the URL's database need be installed.
 * The table and schema names are validated by the adapters (core validateIdentifier) before they
 * reach any SQL.
 */
export async function openStore(location: StoreLocation): Promise<CommandStore> {
  const { url, table, schema, pooler, listenUrl } = location;
  const poolSize = location.poolSize ?? 2;
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  const postgres = scheme === 'postgres' || scheme === 'postgresql';
  if (!postgres && (pooler !== undefined || listenUrl !== undefined)) {
    throw new InvalidArgumentError('--pooler and --listen-db apply to PostgreSQL only');
  }
  const poolerMode = POOLER_MODES.find((mode) => mode === pooler);
  if (pooler !== undefined && poolerMode === undefined) {
    throw new InvalidArgumentError(
      `--pooler takes none or transaction, not ${JSON.stringify(pooler.slice(0, 40))}`,
    );
  }
  if (listenUrl !== undefined && !/^postgres(ql)?:\/\//i.test(listenUrl)) {
    throw new InvalidArgumentError('--listen-db takes a postgres:// URL of a direct connection');
  }
  if (scheme !== 'sqlite') requireWellFormedUrl('--db', url);
  if (listenUrl !== undefined) requireWellFormedUrl('--listen-db', listenUrl);
  switch (scheme) {
    case 'sqlite': {
      if (schema !== undefined) throw new InvalidArgumentError('--schema applies to PostgreSQL only');
      const filename = sqliteFilename(url);
      const { createSqliteStore } = await loadAdapter(
        ADAPTERS.sqlite,
        () => import('@asynccmd/adapter-sqlite'),
      );
      if (filename !== ':memory:') {
        // A database problem (exit 1), not bad usage: the URL may be right and the file not made yet.
        if (location.mustExist && !existsSync(filename)) {
          throw new CliFailure(
            `no SQLite database at ${JSON.stringify(filename)}: run "asynccmd migrate" to create it`,
            EXIT_FAILED,
          );
        }
        if (!existsSync(dirname(filename))) {
          throw new CliFailure(
            `the directory of the SQLite file ${JSON.stringify(filename)} does not exist`,
            EXIT_FAILED,
          );
        }
      }
      return createSqliteStore({ filename, ...(table !== undefined ? { table } : {}) });
    }
    case 'postgres':
    case 'postgresql': {
      const { createPostgresStore } = await loadAdapter(
        ADAPTERS.postgres,
        () => import('@asynccmd/adapter-postgres'),
      );
      return createPostgresStore({
        connectionString: url,
        // A small pool keeps a busy database's slots free.
        poolConfig: { max: poolSize, connectionTimeoutMillis: CONNECT_TIMEOUT_MS },
        ...(poolerMode !== undefined ? { pooler: poolerMode } : {}),
        ...(listenUrl !== undefined ? { listenConnection: listenUrl } : {}),
        ...(schema !== undefined ? { schema } : {}),
        ...(table !== undefined ? { table } : {}),
      });
    }
    case 'mysql':
    case 'mariadb': {
      if (schema !== undefined) {
        throw new InvalidArgumentError(
          '--schema applies to PostgreSQL only: name the MySQL database in the URL',
        );
      }
      const { createMysqlStore } = await loadAdapter(ADAPTERS.mysql, () => import('@asynccmd/adapter-mysql'));
      return createMysqlStore({
        // mysql2 reads only mysql:// URIs; mariadb:// is the same protocol.
        connection: { uri: `mysql:${url.slice(scheme.length + 1)}`, connectTimeout: CONNECT_TIMEOUT_MS },
        connectionLimit: poolSize,
        ...(table !== undefined ? { table } : {}),
      });
    }
    default:
      throw new InvalidArgumentError(
        `unsupported database URL ${JSON.stringify(redactUrl(url))}: expected sqlite:PATH, postgres://… or mysql://…`,
      );
  }
}

/**
 * Imports an adapter; when it or its driver is not installed, a one-line failure (exit 1) that
 * names the packages to add. The adapters are optional peers of the CLI: a PostgreSQL user installs
 * neither SQLite's native driver nor mysql2.
 */
async function loadAdapter<M>(pkg: AdapterPackage, load: () => Promise<M>): Promise<M> {
  try {
    return await load();
  } catch (error) {
    if ((error as { code?: unknown } | null)?.code !== 'ERR_MODULE_NOT_FOUND') throw error;
    const adapterUrl = resolved(pkg.adapter);
    const missing = [
      ...(adapterUrl === null ? [pkg.adapter] : []),
      ...(driverInstalled(pkg, adapterUrl) ? [] : [pkg.driver]),
    ];
    throw new CliFailure(
      missing.length === 0
        ? `${pkg.adapter} could not be loaded: a package it imports is missing (reinstall it)`
        : `the ${pkg.database} adapter is not installed: npm install ${missing.join(' ')}`,
      EXIT_FAILED,
    );
  }
}

function resolved(specifier: string): string | null {
  try {
    return import.meta.resolve(specifier);
  } catch {
    return null;
  }
}

/** Whether the driver resolves where the adapter (or, without one, the CLI) would look for it. */
function driverInstalled(pkg: AdapterPackage, adapterUrl: string | null): boolean {
  try {
    createRequire(adapterUrl ?? import.meta.url).resolve(pkg.driver);
    return true;
  } catch {
    return false;
  }
}

/** `sqlite:data/app.db`, `sqlite:/abs/app.db`, `sqlite:///abs/app.db`, `sqlite://data/app.db`. */
export function sqliteFilename(url: string): string {
  const rest = url.slice('sqlite:'.length);
  const filename = rest.startsWith('//') ? rest.slice(2) : rest;
  if (filename === '') throw new InvalidArgumentError('sqlite: URL names no file (e.g. sqlite:data/app.db)');
  return filename;
}

/**
 * A server URL the drivers can parse (bad usage, exit 2, when not): an unclosed `[::1`, a port
 * beyond 65535 or not a number would otherwise reach the driver and fail as "cannot reach the
 * database". pg also takes `user@/db?host=/socket/dir`, an empty host, as its parser does.
 */
function requireWellFormedUrl(option: string, url: string): void {
  try {
    new URL(url.replace('@/', '@localhost/'));
  } catch {
    throw new InvalidArgumentError(
      `${option} ${JSON.stringify(redactUrl(url).slice(0, 200))} is not a well-formed URL ` +
        '(check the host, an IPv6 address in [brackets], and a port from 1 to 65535)',
    );
  }
  const port = /^[a-z][a-z0-9+.-]*:\/\/(?:[^/?#@]*@)?(?:\[[^\]]*\]|[^/?#:]*):(\d+)/i.exec(url)?.[1];
  if (port !== undefined && Number(port) === 0) {
    throw new InvalidArgumentError(`${option}: port 0 is not a port to connect to (1 to 65535)`);
  }
}

/** Query parameters that carry a secret (password, sslpassword, token, …). */
const SECRET_PARAMETER = /pass|pwd|secret|token/i;

/** The URL with its password hidden — in the user part and in the query string — for messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    for (const name of new Set(u.searchParams.keys())) {
      if (SECRET_PARAMETER.test(name)) u.searchParams.set(name, '***');
    }
    return u.toString();
  } catch {
    // Not a URL the parser takes: hide what looks like a secret all the same.
    return url
      .replace(/(\/\/[^:/?#@]*:)[^/?#]*@/, '$1***@')
      .replace(/([?&][^=&#]*(?:pass|pwd|secret|token)[^=&#]*=)[^&#]*/gi, '$1***');
  }
}
