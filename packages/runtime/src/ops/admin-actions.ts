import type { AdminError, AdminTransition, CommandId, CommandRecord, CommandStore } from '@asynccmd/core';
import type * as E from 'fp-ts/lib/Either.js';

/**
 * Runs one of the admin transitions. "Due now" is the database clock's now: the operator's machine
 * may be anywhere, and every instance already trusts the database for leases.
 */
export async function applyAdminTransition(
  store: CommandStore,
  transition: AdminTransition,
  id: CommandId,
  reason?: string,
): Promise<E.Either<AdminError, CommandRecord>> {
  switch (transition) {
    case 'retry':
      return store.retry(id, await store.now());
    case 'requeue':
      return store.requeue(id, await store.now());
    case 'kill':
      return store.kill(id, reason);
    case 'cancel':
      return store.cancel(id, reason);
  }
}
