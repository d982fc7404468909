import { serialisePayload } from '@asynccmd/core';
import type { NewCommand, SqlExecutor } from '@asynccmd/core';
import pg from 'pg';
import { createPostgresStore } from '../src/index.js';
import type { PostgresCommandStore, PostgresStoreOptions } from '../src/index.js';

export const DATABASE_URL = process.env.ASYNCCMD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A schema name no other test file (or run) uses. */
export function uniqueSchema(prefix: string): string {
  return `${prefix}_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 6)}`;
}

/** A store with its own small pool on `schema`, migrated. */
export async function openStore(
  schema: string,
  options: Partial<PostgresStoreOptions> = {},
): Promise<PostgresCommandStore> {
  const store = createPostgresStore({
    connectionString: DATABASE_URL,
    poolConfig: { max: 4 },
    schema,
    ...options,
  });
  await store.migrate();
  return store;
}

/** Runs SQL on a short-lived connection of its own (setup and inspection, never the store's). */
export async function adminQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/**
 * Leaves `store`'s schema as a store whose last migration was `version` left it: the setup and the
 * versions up to it from the store's own script, run by hand in one transaction (an upgrade's start).
 */
export async function migrateUpTo(store: PostgresCommandStore, version: number): Promise<void> {
  const script = await store.migrationScript({ all: true });
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  try {
    await admin.query('BEGIN');
    for (const statement of script.setup) await admin.query(statement);
    for (const v of script.versions.filter((s) => s.version <= version))
      for (const statement of v.statements) await admin.query(statement);
    await admin.query('COMMIT');
  } finally {
    await admin.end();
  }
}

export async function dropSchema(schema: string): Promise<void> {
  await adminQuery(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}

export function command(type: string, payload: unknown = {}, extra: Partial<NewCommand> = {}): NewCommand {
  const json = serialisePayload(payload);
  if (json._tag === 'Left') throw json.left;
  return { type, payloadJson: json.right, maxRetry: 3, ...extra };
}

/**
 * A client of an open transaction as an SqlExecutor, binding values as `$n` parameters: what an
 * ORM bridge hands the store, without an ORM.
 */
export function clientAsSqlExecutor(client: pg.ClientBase): SqlExecutor {
  return {
    kind: 'sql-executor',
    async run(strings, values) {
      const text = strings.reduce((sql, part, i) => `${sql}$${i}${part}`);
      return (await client.query(text, [...values])).rows as Record<string, unknown>[];
    },
  };
}
