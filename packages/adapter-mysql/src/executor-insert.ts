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
    return { id: await insertRow(executor, insertOne, values), duplicate: false, replaced: false };
  } catch (e) {
    // Some ORMs wrap the driver's error; the refused insert rolled back only itself.
    if (!isDuplicateKey(e) && !isDuplicateKey((e as { cause?: unknown } | null)?.cause)) throw e;
  }
  const [holder] = await run(executor, activeHolder, [key.type, key.bizKey]);
  return holder ? { id: String(holder.id), duplicate: true, replaced: false } : null;
}

/**
 * What an insertReplacingPending did, from LAST_INSERT_ID() right after it as signed text: the new
 * id (inserted), minus the holder's id (it was PENDING and took the contents); null for 0 (the
 * holder was left alone: the caller looks it up).
 */
export function replacingOutcome(lastId: string): InsertResult | null {
  if (/^[1-9][0-9]*$/.test(lastId)) return { id: lastId, duplicate: false, replaced: false };
  if (/^-[1-9][0-9]*$/.test(lastId)) return { id: lastId.slice(1), duplicate: true, replaced: true };
  if (lastId === '0') return null;
  throw new Error('the replacing insert left no id');
}

/** One insertReplacingPending through the executor; null when it has to be tried again (see leftAlone). */
export async function replaceIdempotentThroughExecutor(
  executor: SqlExecutor,
  statement: string,
  sql: { readonly lastInsertIdSigned: string; readonly activeHolderStatus: string },
  values: readonly unknown[],
  key: { readonly type: string; readonly bizKey: string },
): Promise<InsertResult | null> {
  await run(executor, statement, values as readonly SqlValue[]);
  const [last] = await run(executor, sql.lastInsertIdSigned, []);
  const outcome = replacingOutcome(String(last?.id));
  if (outcome !== null) return outcome;
  const [holder] = await run(executor, sql.activeHolderStatus, [key.type, key.bizKey]);
  return leftAlone(holder as { id: unknown; status: unknown } | undefined);
}

/**
 * The answer of a replacing insert that left the key's holder alone: RUNNING, not replaced; null
 * (ask again) when it finished, or became PENDING again (a released or failed attempt) meanwhile.
 */
export function leftAlone(
  holder: { readonly id: unknown; readonly status: unknown } | undefined,
): InsertResult | null {
  if (holder === undefined || holder.status !== 'RUNNING') return null;
  return { id: String(holder.id), duplicate: true, replaced: false };
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
