import type Database from 'better-sqlite3';
import type { Pool as MysqlPool, PoolConnection as MysqlConnection, ResultSetHeader } from 'mysql2/promise';
import type pg from 'pg';

export type Dialect = 'sqlite' | 'postgres' | 'mysql';

/**
 * The order service's SQL on one of the three databases: `?` placeholders everywhere (numbered for
 * PostgreSQL here), rows as plain objects. A session is either the database's autocommit handle
 * or the transaction handle asynccmd hands to `client.transaction`, so an order and its commands
 * commit together.
 */
export interface SqlSession {
  readonly dialect: Dialect;
  /** Rows of a SELECT. */
  all<Row>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Rows an INSERT / UPDATE / DELETE changed. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
  /** An INSERT into a table with a generated `id`: that id. */
  insert(sql: string, params?: readonly unknown[]): Promise<number>;
}

/** `(?, ?, ?)` for an IN list of `n` values (callers never pass an empty list). */
export function placeholders(n: number): string {
  return `(${Array.from({ length: n }, () => '?').join(', ')})`;
}

const STATEMENTS = new WeakMap<Database.Database, Map<string, Database.Statement>>();

/** Prepared once per connection: the status resource is read often. */
function prepare(db: Database.Database, sql: string): Database.Statement {
  let cache = STATEMENTS.get(db);
  if (!cache) STATEMENTS.set(db, (cache = new Map()));
  let stmt = cache.get(sql);
  if (!stmt) cache.set(sql, (stmt = db.prepare(sql)));
  return stmt;
}

export function sqliteSession(db: Database.Database): SqlSession {
  return {
    dialect: 'sqlite',
    all: async <Row>(sql: string, params: readonly unknown[] = []) =>
      prepare(db, sql).all(...params) as Row[],
    run: async (sql, params = []) => prepare(db, sql).run(...params).changes,
    insert: async (sql, params = []) => Number(prepare(db, sql).run(...params).lastInsertRowid),
  };
}

/** `?` → `$1, $2, …` (the demo's SQL has no `?` inside string literals). */
function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

export function postgresSession(db: pg.Pool | pg.PoolClient): SqlSession {
  const query = (sql: string, params: readonly unknown[]) => db.query(numbered(sql), [...params]);
  return {
    dialect: 'postgres',
    all: async <Row>(sql: string, params: readonly unknown[] = []) =>
      (await query(sql, params)).rows as Row[],
    run: async (sql, params = []) => (await query(sql, params)).rowCount ?? 0,
    insert: async (sql, params = []) => {
      const { rows } = await query(`${sql} RETURNING id`, params);
      return Number((rows[0] as { id: string | number }).id);
    },
  };
}

export function mysqlSession(db: MysqlPool | MysqlConnection): SqlSession {
  const header = async (sql: string, params: readonly unknown[]) =>
    (await db.query(sql, [...params]))[0] as ResultSetHeader;
  return {
    dialect: 'mysql',
    all: async <Row>(sql: string, params: readonly unknown[] = []) =>
      (await db.query(sql, [...params]))[0] as Row[],
    run: async (sql, params = []) => (await header(sql, params)).affectedRows,
    insert: async (sql, params = []) => Number((await header(sql, params)).insertId),
  };
}

/** A unique constraint refused the statement, on any of the three databases. */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === '23505' || code === 'ER_DUP_ENTRY';
}
