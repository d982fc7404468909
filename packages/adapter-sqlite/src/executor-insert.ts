import type { CommandId, InsertResult, SqlExecutor, SqlValue } from '@asynccmd/core';
import {
  commandIdFromExecutor as idText,
  insertEachThroughExecutor,
  runThroughExecutor,
} from '@asynccmd/core/store-kit';

/**
 * Submits through an SqlExecutor (an ORM's transaction on this database file): the store's own
 * single-row INSERT, one per command (every row checked before the first is written), its id read
 * back as text by RETURNING, so no number handling of the ORM's can round it.
 */
export function insertThroughExecutor(
  executor: SqlExecutor,
  insertOne: string,
  rows: readonly (readonly SqlValue[])[],
): Promise<CommandId[]> {
  return insertEachThroughExecutor((text, values) => run(executor, text, values), insertOne, rows);
}

/** One idempotent insert; null when the key's holder finished meanwhile (the caller tries again). */
export async function insertIdempotentThroughExecutor(
  executor: SqlExecutor,
  insertIdempotent: string,
  activeHolder: string,
  values: readonly SqlValue[],
  key: { readonly type: string; readonly bizKey: string },
): Promise<InsertResult | null> {
  const [inserted] = await run(executor, insertIdempotent, values);
  if (inserted) return { id: idText(inserted.id), duplicate: false, replaced: false };
  const [holder] = await run(executor, activeHolder, [key.type, key.bizKey]);
  return holder ? { id: idText(holder.id), duplicate: true, replaced: false } : null;
}

/**
 * A replacing submit's replacePending through the executor; null when no PENDING holder matched
 * (then the insert or look-up follows in the same transaction, under the write lock this took).
 */
export async function replacePendingThroughExecutor(
  executor: SqlExecutor,
  replacePending: string,
  values: readonly SqlValue[],
): Promise<InsertResult | null> {
  const [replaced] = await run(executor, replacePending, values);
  return replaced ? { id: idText(replaced.id), duplicate: true, replaced: true } : null;
}

const run = (executor: SqlExecutor, text: string, params: readonly SqlValue[]) =>
  runThroughExecutor(executor, text, params, 'question-mark');
