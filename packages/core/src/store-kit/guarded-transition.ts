import * as E from 'fp-ts/lib/Either.js';
import type { CommandId, CommandRecord } from '../command.js';
import { CommandNotFoundError, IdempotencyConflictError, StoreContentionError } from '../errors.js';
import type { AdminError } from '../ports/store.js';
import type { CommandStatus } from '../status.js';
import { checkTransition } from '../transitions.js';
import type { AdminTransition } from '../transitions.js';

/**
 * How often an admin transition is tried when the row keeps changing between its guarded write and
 * the read that explains a refusal. Each try costs two statements; a row that moves this often in
 * a few milliseconds is being fought over, and the caller hears so (StoreContentionError).
 */
export const ADMIN_TRANSITION_ATTEMPTS = 5;

/** What one try of a guarded admin write found. */
export type GuardedAttempt =
  /** The write applied: the command as it now is. */
  | { readonly applied: CommandRecord }
  /** The write was refused for a reason of its own (an idempotency key held by another command). */
  | { readonly refused: AdminError }
  /** The write matched nothing: the command's status now, or null when there is no such command. */
  | { readonly unmatched: CommandStatus | null };

/**
 * Drives an admin transition (retry, requeue, kill, cancel): `attempt` runs the guarded write
 * (`WHERE id = ? AND status IN (sources)`) and, when it matched nothing, reads the row's status.
 * A missing row or a status the transition does not start from is the answer; a status it does
 * start from means the row moved in between, and the write is tried again.
 */
export async function guardedTransition(
  transition: AdminTransition,
  id: CommandId,
  attempt: () => Promise<GuardedAttempt>,
): Promise<E.Either<AdminError, CommandRecord>> {
  for (let i = 0; i < ADMIN_TRANSITION_ATTEMPTS; i++) {
    const found = await attempt();
    if ('applied' in found) return E.right(found.applied);
    if ('refused' in found) return E.left(found.refused);
    if (found.unmatched === null) return E.left(new CommandNotFoundError(id));
    const allowed = checkTransition(transition, found.unmatched, id);
    if (E.isLeft(allowed)) return E.left(allowed.left);
  }
  throw new StoreContentionError(transition, `command ${id}`);
}

/** An admin retry refused because the command's (type, bizKey) is held by `holder`. */
export function keyHeldBy(id: CommandId, holder: CommandId | null): GuardedAttempt {
  return { refused: new IdempotencyConflictError(id, holder) };
}

/**
 * How often an idempotent submit asks again while its key's holder keeps finishing between the
 * refused insert and the look-up of the holder. Rare; each try is cheap.
 */
export const IDEMPOTENT_INSERT_ATTEMPTS = 20;

/**
 * Drives an idempotent insert: `attempt` inserts, or finds the key's unfinished holder; it
 * returns null when neither happened (the holder finished in between), and then it runs again.
 */
export async function insertIdempotently<R>(
  key: { readonly type: string; readonly bizKey: string },
  attempt: () => Promise<R | null>,
): Promise<R> {
  for (let i = 0; i < IDEMPOTENT_INSERT_ATTEMPTS; i++) {
    const result = await attempt();
    if (result !== null) return result;
  }
  throw new StoreContentionError('an idempotent submit', `the holder of (${key.type}, ${key.bizKey})`);
}
