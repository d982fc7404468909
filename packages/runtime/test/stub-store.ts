import type { ClaimRef, CommandId, CommandStore } from '@asynccmd/core';

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
      if (prop === 'capabilities') return { skipLocked: false, wakeups: false };
      if (prop === 'wakeups' || prop === 'then') return undefined;
      return missing(prop);
    },
  });
}

export const ref = (id: CommandId, token = `t${id}`): ClaimRef => ({ id, token });
