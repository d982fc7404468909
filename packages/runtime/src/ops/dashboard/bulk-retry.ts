import { InvalidArgumentError, type CommandId, type CommandStore, type Logger } from '@asynccmd/core';
import * as E from 'fp-ts/lib/Either.js';
import { applyAdminTransition } from '../admin-actions.js';
import { requireCommandId } from '../validation.js';

/** The most dead letters one bulk retry takes: a page of them, never "everything". */
export const MAX_BULK_RETRY = 100;

export interface BulkRetryResult {
  readonly retried: readonly CommandId[];
  /** Those no longer DEAD, gone, or whose idempotency key a newer command holds. */
  readonly refused: readonly { readonly id: CommandId; readonly code: string; readonly message: string }[];
}

/** `{"ids": ["12", "15"]}`: the dead letters a person saw and chose, each checked before any retry. */
export function parseBulkRetry(body: Record<string, unknown>): CommandId[] {
  const keys = Object.keys(body);
  if (keys.length !== 1 || !Array.isArray(body['ids'])) {
    throw new InvalidArgumentError('a bulk retry takes {"ids": [...]}, the ids of the dead letters to retry');
  }
  const ids = body['ids'] as unknown[];
  if (ids.length === 0 || ids.length > MAX_BULK_RETRY) {
    throw new InvalidArgumentError(`a bulk retry takes 1 to ${MAX_BULK_RETRY} ids, not ${ids.length}`);
  }
  return [...new Set(ids.map(requireCommandId))];
}

/** Retries each one that is still DEAD; the others are reported, never fail the rest. */
export async function retryDeadLetters(
  store: CommandStore,
  ids: readonly CommandId[],
  logger: Logger,
): Promise<BulkRetryResult> {
  const retried: CommandId[] = [];
  const refused: { id: CommandId; code: string; message: string }[] = [];
  for (const id of ids) {
    const result = await applyAdminTransition(store, 'retry', id);
    if (E.isRight(result)) retried.push(id);
    else refused.push({ id, code: result.left.code, message: result.left.message });
  }
  logger.info({ retried, refused: refused.map((r) => r.id) }, 'admin bulk retry');
  return { retried, refused };
}
