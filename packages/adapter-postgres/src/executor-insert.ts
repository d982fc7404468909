import type { CommandId, InsertResult, NewCommand, SqlExecutor, SqlValue } from '@asynccmd/core';
import { sqlTemplate } from '@asynccmd/core';
import { commandValues } from './checks.js';
import { rolledBackIfAborted } from './commit.js';

/**
 * Submits through an SqlExecutor (an ORM's transaction): the store's own single-row statements,
 * one per command, their ids read back as text so no type parser of the ORM's can round them.
 */
export async function insertThroughExecutor(
  executor: SqlExecutor,
  insertOne: string,
  commands: readonly NewCommand[],
  maxPayloadBytes: number,
): Promise<CommandId[]> {
  // Every command is checked before the first is written.
  const params = commands.map((c) => rowValues(commandValues(c, maxPayloadBytes)));
  const statement = `WITH inserted AS (${insertOne}) SELECT id::text AS id FROM inserted`;
  const ids: CommandId[] = [];
  for (const values of params) {
    const [row] = await run(executor, statement, values);
    ids.push(idText(row?.id));
  }
  return ids;
}

export async function insertIdempotentThroughExecutor(
  executor: SqlExecutor,
  insertIdempotent: string,
  command: NewCommand,
  maxPayloadBytes: number,
): Promise<InsertResult | null> {
  const values = rowValues(commandValues(command, maxPayloadBytes));
  const [row] = await run(executor, insertIdempotent, values);
  if (!row) return null;
  return { id: idText(row.id), duplicate: row.duplicate === true || row.duplicate === 't' };
}

async function run(
  executor: SqlExecutor,
  text: string,
  params: readonly SqlValue[],
): Promise<readonly Record<string, unknown>[]> {
  const { strings, values } = sqlTemplate(text, params, 'numbered');
  try {
    return await executor.run(strings, values);
  } catch (e) {
    throw rolledBackIfAborted(e);
  }
}

function rowValues(v: ReturnType<typeof commandValues>): SqlValue[] {
  return [v.type, v.bizKey, v.payloadJson, v.maxRetry, v.runAt, v.owner, v.headersJson];
}

/** An id as text; a number only when exact (an ORM that parses BIGINT as a JavaScript number). */
function idText(value: unknown): CommandId {
  if (typeof value === 'string' && value !== '') return value;
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  throw new Error('the insert through the SqlExecutor returned no usable id');
}
