import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '@asynccmd/core';
import type { CommandStore, SqlExecutor } from '@asynccmd/core';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { createAsyncCommands, defineExecutor } from '@asynccmd/runtime';

const note = defineExecutor<'orm.note', { n: number }>({ type: 'orm.note', execute: () => undefined });

/** An SqlExecutor over a better-sqlite3 handle, counting the statements it runs. */
function handleExecutor(db: Database.Database): SqlExecutor & { statements: number } {
  const executor = {
    kind: 'sql-executor' as const,
    statements: 0,
    run: async (strings: readonly string[], values: readonly (string | number | null)[]) => {
      executor.statements++;
      const stmt = db.prepare(strings.join('?'));
      if (stmt.reader) return stmt.all(...values) as Record<string, unknown>[];
      stmt.run(...values);
      return [];
    },
  };
  return executor;
}

describe('a store that takes no SqlExecutor', () => {
  it('refuses the submit with a typed error before running any statement', async () => {
    const db = new Database(':memory:');
    const sqlite = createSqliteStore({ database: db });
    await sqlite.migrate();
    // A store of another author's that declares no executor support (the SQLite store's statements underneath).
    const store = new Proxy(sqlite, {
      get: (target, key, receiver): unknown =>
        key === 'capabilities'
          ? { ...target.capabilities, sqlExecutor: false }
          : (Reflect.get(target, key, receiver) as unknown),
    }) as CommandStore<Database.Database>;
    const commands = createAsyncCommands({ store, executors: [note] as const });
    const executor = handleExecutor(db);
    await expect(commands.client.submit(executor, 'orm.note', { n: 1 })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    expect(executor.statements).toBe(0);
    db.close();
  });
});

describe('the SQLite store through an SqlExecutor', () => {
  it('submits, submits many and submits idempotently in the executor’s transaction', async () => {
    const db = new Database(':memory:');
    const store = createSqliteStore({ database: db });
    await store.migrate();
    expect(store.capabilities.sqlExecutor).toBe(true);
    const commands = createAsyncCommands({ store, executors: [note] as const });
    const executor = handleExecutor(db);
    db.exec('BEGIN');
    const one = await commands.client.submit(executor, 'orm.note', { n: 1 });
    const many = await commands.client.submitMany(executor, [
      { type: 'orm.note', payload: { n: 2 } },
      { type: 'orm.note', payload: { n: 3 } },
    ]);
    const first = await commands.client.submitIdempotent(executor, 'orm.note', 'key-1', { n: 4 });
    const again = await commands.client.submitIdempotent(executor, 'orm.note', 'key-1', { n: 5 });
    db.exec('COMMIT');
    expect([one, ...many, first.id]).toEqual(['1', '2', '3', '4']);
    expect(first.duplicate).toBe(false);
    expect(again).toEqual({ id: '4', duplicate: true, replaced: false });
    expect((await store.list({})).items.map((c) => c.payload)).toEqual([
      { n: 4 },
      { n: 3 },
      { n: 2 },
      { n: 1 },
    ]);

    db.exec('BEGIN');
    await commands.client.submit(executor, 'orm.note', { n: 6 });
    db.exec('ROLLBACK');
    expect((await store.list({})).items).toHaveLength(4);
    db.close();
  });
});
