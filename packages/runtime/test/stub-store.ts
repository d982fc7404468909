import type { ClaimedCommand, ClaimRef, CommandId, CommandStore } from '@asynccmd/core';

/**
 * A partial store for unit tests of the runtime's pure-ish parts (pools, leases, batching,
 * validation). End-to-end tests never use it: they run on real databases.
 */
export function stubStore(overrides: Partial<CommandStore>): CommandStore {
  const missing = (name: string) => () => Promise.reject(new Error(`stub store: ${name} not stubbed`));
  return new Proxy(overrides as CommandStore, {
    get(target, prop: string) {
      if (prop in target) return target[prop as keyof CommandStore];
      if (prop === 'dialect') return 'stub';
      if (prop === 'capabilities') {
        return {
          skipLocked: false,
          wakeups: false,
          revocations: false,
          sqlExecutor: false,
          commitRiding: null,
        };
      }
      // Optional parts of the port: absent unless stubbed.
      if (
        [
          'wakeups',
          'revocations',
          'schedules',
          'typePauses',
          'transactionalCompletion',
          'migrationScript',
          'then',
        ].includes(prop)
      )
        return undefined;
      return missing(prop);
    },
  });
}

export const ref = (id: CommandId, token = `t${id}`): ClaimRef => ({ id, token });

/** A RUNNING row as a claim returns it, with token `t<id>`. */
export function claimedRow(
  id: CommandId,
  type: string,
  overrides: Partial<ClaimedCommand> = {},
): ClaimedCommand {
  const now = new Date();
  return {
    id,
    type,
    bizKey: null,
    payload: {},
    status: 'RUNNING',
    maxRetry: 5,
    retryCount: 0,
    rescueCount: 0,
    priority: 0,
    orderingKey: null,
    retryCountAtRetry: 0,
    rescueCountAtRetry: 0,
    claimedBy: null,
    history: [],
    nextRunAt: now,
    lastError: null,
    owner: null,
    claimToken: `t${id}`,
    leaseUntil: now,
    idempotent: false,
    headers: {},
    createdAt: now,
    updatedAt: now,
    startedAt: now,
    finishedAt: null,
    result: null,
    progress: null,
    ...overrides,
  };
}
