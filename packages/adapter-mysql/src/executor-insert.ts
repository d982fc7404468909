import type { CommandId, InsertResult, SqlExecutor, SqlValue } from '@asynccmd/core';
import { runThroughExecutor } from '@asynccmd/core/store-kit';
import { isDuplicateKey } from './connection.js';
import type { MysqlSql } from './sql.js';

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

/** How a replacing submit runs its statements: on the caller's connection, or through an SqlExecutor. */
export type RunStatement = (
  sql: string,
  values: readonly unknown[],
) => Promise<readonly Record<string, unknown>[]>;

type ReplacingSql = Pick<
  MysqlSql,
  | 'replacingHolderSeen'
  | 'replaceHolder'
  | 'insertReplacingPending'
  | 'lastInsertIdSigned'
  | 'activeHolderStatus'
>;

/**
 * One try of a replacing idempotent submit (see sql.ts replacingHolderSeen): the holder found,
 * written by id; else the insert. `contents` are replaceHolder's parameters before the id;
 * `row` INSERT_ROW's. Null when it has to be tried again: the holder left alone was not RUNNING
 * any more by the look-up that followed.
 */
export async function replaceIdempotently(
  run: RunStatement,
  sql: ReplacingSql,
  key: { readonly type: string; readonly bizKey: string },
  withRunAt: boolean,
  contents: readonly unknown[],
  row: readonly unknown[],
): Promise<InsertResult | null> {
  const [seen] = await run(sql.replacingHolderSeen, [key.type, key.bizKey]);
  if (typeof seen?.id === 'string' && seen.id !== '') {
    await run(sql.replaceHolder(withRunAt), [...contents, seen.id, key.type, key.bizKey]);
    const outcome = await lastOutcome(run, sql);
    // Positive: the holder was not PENDING (left alone, so a duplicate); 0: it holds the key no more.
    if (outcome !== null) return outcome.duplicate ? outcome : { ...outcome, duplicate: true };
  }
  await run(sql.insertReplacingPending(withRunAt), [...row, ...contents]);
  const outcome = await lastOutcome(run, sql);
  if (outcome !== null) return outcome;
  const [holder] = await run(sql.activeHolderStatus, [key.type, key.bizKey]);
  return leftAlone(holder as { id: unknown; status: unknown } | undefined);
}

/**
 * What the replacing statement just run did, from LAST_INSERT_ID() as signed text: minus an id,
 * that command took the contents; an id, that command is the one (inserted, or left alone); null
 * for 0, none.
 */
async function lastOutcome(run: RunStatement, sql: ReplacingSql): Promise<InsertResult | null> {
  const [last] = await run(sql.lastInsertIdSigned, []);
  const text = String(last?.id);
  if (/^-[1-9][0-9]*$/.test(text)) return { id: text.slice(1), duplicate: true, replaced: true };
  if (/^[1-9][0-9]*$/.test(text)) return { id: text, duplicate: false, replaced: false };
  if (text === '0') return null;
  throw new Error('the replacing submit left no id');
}

/**
 * The answer of a replacing insert that left the key's holder alone: RUNNING, not replaced; null
 * (ask again) when it finished, or became PENDING again (a released or failed attempt) meanwhile.
 */
function leftAlone(
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

/** An SqlExecutor as a replacing submit's RunStatement. */
export function statementsThrough(executor: SqlExecutor): RunStatement {
  return (text, values) => run(executor, text, values as readonly SqlValue[]);
}
