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
