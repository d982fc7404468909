import type { CommandId, InsertResult, SqlExecutor, SqlValue } from '@asynccmd/core';
import {
  commandIdFromExecutor as idText,
  insertEachThroughExecutor as insertEach,
  runThroughExecutor,
} from '@asynccmd/core/store-kit';
import { rolledBackIfAborted } from './connection.js';

/**
 * Submits through an SqlExecutor (an ORM's transaction): the store's own single-row statements,
 * one per command (every row checked before the first is written), their ids read back as text
 * so no type parser of the ORM's can round them.
 */
export async function insertThroughExecutor(
  executor: SqlExecutor,
  insertOne: string,
  rows: readonly (readonly unknown[])[],
): Promise<CommandId[]> {
  const statement = `WITH inserted AS (${insertOne}) SELECT id::text AS id FROM inserted`;
  return insertEachThroughExecutor(executor, statement, rows);
}

/** Each row through `insertOne`, a statement that selects its id as text itself, one after another. */
export function insertEachThroughExecutor(
  executor: SqlExecutor,
  insertOne: string,
  rows: readonly (readonly unknown[])[],
): Promise<CommandId[]> {
  return insertEach(
    (text, values) => run(executor, text, values),
    insertOne,
    rows as readonly (readonly SqlValue[])[],
  );
}

/** One idempotent insert; null when the key's holder finished meanwhile (the caller tries again). */
export async function insertIdempotentThroughExecutor(
  executor: SqlExecutor,
  insertIdempotent: string,
  values: readonly unknown[],
): Promise<InsertResult | null> {
  const [row] = await run(executor, insertIdempotent, values);
  if (!row) return null;
  return { id: idText(row.id), duplicate: isTrue(row.duplicate), replaced: isTrue(row.replaced) };
}

/** A boolean column as an ORM hands it back: parsed, or PostgreSQL's text form. */
function isTrue(value: unknown): boolean {
  return value === true || value === 't';
}

async function run(
  executor: SqlExecutor,
  text: string,
  params: readonly unknown[],
): Promise<readonly Record<string, unknown>[]> {
  try {
    return await runThroughExecutor(executor, text, params as readonly SqlValue[], 'numbered');
  } catch (e) {
    throw rolledBackIfAborted(e);
  }
}
