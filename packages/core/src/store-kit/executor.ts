import type { CommandId } from '../command.js';
import type { SqlExecutor, SqlValue } from '../ports/sql-executor.js';
import { sqlTemplate } from '../ports/sql-executor.js';

/** Runs `text`, written with its database's placeholders, with `params` through `executor`. */
export function runThroughExecutor(
  executor: SqlExecutor,
  text: string,
  params: readonly SqlValue[],
  placeholders: 'numbered' | 'question-mark',
): Promise<readonly Record<string, unknown>[]> {
  const { strings, values } = sqlTemplate(text, params, placeholders);
  return executor.run(strings, values);
}

/**
 * A command id read back through an SqlExecutor: the decimal text the stores select, or a number
 * or bigint where an ORM's type parsers turned it into one (a number only while it is exact).
 */
export function commandIdFromExecutor(value: unknown): CommandId {
  if (typeof value === 'string' && /^[1-9][0-9]*$/.test(value)) return value;
  if (typeof value === 'bigint' && value > 0n) return value.toString();
  if (typeof value === 'number' && Number.isSafeInteger(value) && value > 0) return String(value);
  throw new Error('the insert through the SqlExecutor returned no usable id');
}

/**
 * Submits through an SqlExecutor one row at a time with `insertOne`, a single-row statement whose
 * first row holds the new id (as text, so no number handling of an ORM's can round it); every row
 * was checked before the first is written. `run` runs a statement through the executor.
 */
export async function insertEachThroughExecutor(
  run: (text: string, values: readonly SqlValue[]) => Promise<readonly Record<string, unknown>[]>,
  insertOne: string,
  rows: readonly (readonly SqlValue[])[],
): Promise<CommandId[]> {
  const ids: CommandId[] = [];
  for (const values of rows) {
    const [row] = await run(insertOne, values);
    ids.push(commandIdFromExecutor(row?.id));
  }
  return ids;
}
