import type { CommandId, InsertResult, SqlExecutor, SqlValue } from '@asynccmd/core';
import { runThroughExecutor } from '@asynccmd/core/store-kit';
import { isDuplicateKey } from './connection.js';

/** The id the last INSERT on the transaction's connection generated, as text whatever the ORM's number handling. */
const LAST_ID = 'SELECT CAST(LAST_INSERT_ID() AS CHAR) AS id';

/**
 * Submits through an SqlExecutor (an ORM's transaction): the store's own single-row INSERT, one
 * per command, each followed by LAST_INSERT_ID() on the same connection.
 */
export async function insertThroughExecutor(
  executor: SqlExecutor,
  insertOne: string,
  rows: readonly (readonly SqlValue[])[],
): Promise<CommandId[]> {
  const ids: CommandId[] = [];
  for (const values of rows) ids.push(await insertRow(executor, insertOne, values));
  return ids;
}

export async function insertIdempotentThroughExecutor(
  executor: SqlExecutor,
  insertOne: string,
  activeHolder: string,
  values: readonly SqlValue[],
  key: { readonly type: string; readonly bizKey: string },
): Promise<InsertResult | null> {
  try {
    return { id: await insertRow(executor, insertOne, values), duplicate: false };
  } catch (e) {
    // Some ORMs wrap the driver's error; the refused insert rolled back only itself.
    if (!isDuplicateKey(e) && !isDuplicateKey((e as { cause?: unknown } | null)?.cause)) throw e;
  }
  const [holder] = await run(executor, activeHolder, [key.type, key.bizKey]);
  return holder ? { id: String(holder.id), duplicate: true } : null;
}

async function insertRow(
  executor: SqlExecutor,
  insertOne: string,
  values: readonly SqlValue[],
): Promise<CommandId> {
  await run(executor, insertOne, values);
  const [row] = await run(executor, LAST_ID, []);
  const id = row?.id;
  if (typeof id !== 'string' || id === '' || id === '0') {
    throw new Error('the insert through the SqlExecutor returned no id');
  }
  return id;
}

const run = (executor: SqlExecutor, text: string, params: readonly SqlValue[]) =>
  runThroughExecutor(executor, text, params, 'question-mark');
