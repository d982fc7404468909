import type { CommandStore } from '@asynccmd/core';

/**
 * Creates asynccmd's table with asynccmd's own migration, then closes the store: the raw-SQL
 * baselines write and claim the very same table, columns and indexes, so only the code around the
 * SQL differs.
 */
export async function migrateWith(open: () => CommandStore | Promise<CommandStore>): Promise<void> {
  const store = await open();
  try {
    await store.migrate();
  } finally {
    await store.close();
  }
}
