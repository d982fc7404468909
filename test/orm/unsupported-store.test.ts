import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '@asynccmd/core';
import type { SqlExecutor } from '@asynccmd/core';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { createAsyncCommands, defineExecutor } from '@asynccmd/runtime';

describe('a store that takes no SqlExecutor', () => {
  it('refuses the submit with a typed error before running any statement', async () => {
    const db = new Database(':memory:');
    const store = createSqliteStore({ database: db });
    await store.migrate();
    const note = defineExecutor<'orm.note', { n: number }>({ type: 'orm.note', execute: () => undefined });
    const commands = createAsyncCommands({ store, executors: [note] as const });
    let statements = 0;
    const executor: SqlExecutor = {
      kind: 'sql-executor',
      run: async () => {
        statements++;
        return [];
      },
    };
    await expect(commands.client.submit(executor, 'orm.note', { n: 1 })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    expect(statements).toBe(0);
    db.close();
  });
});
