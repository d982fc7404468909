import { asyncTransaction, kyselyTransactions, kyselyTx } from '@asynccmd/kysely';
import type { SqliteCommandStore } from '@asynccmd/adapter-sqlite';
import type { CommandStore } from '@asynccmd/core';
import { defineTransactionalExecutor } from '@asynccmd/runtime';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect } from 'kysely';
import type { Generated, Transaction } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';
import { expectTypeOf } from 'vitest';
import { describeOrm, type Place } from './suite.js';

interface Database {
  orders: { id: Generated<number>; note: string };
}

function openKysely(place: Place, store: CommandStore): Kysely<Database> {
  if (place.dialect === 'sqlite') {
    // The store's own handle: the store's statements wait while Kysely's transaction is open on it.
    const { db } = store as SqliteCommandStore;
    return new Kysely<Database>({ dialect: new SqliteDialect({ database: db }) });
  }
  return new Kysely<Database>({
    dialect:
      place.dialect === 'postgres'
        ? new PostgresDialect({
            pool: new pg.Pool({
              connectionString: place.url,
              max: 2,
              options: `-c search_path=${place.name}`,
            }),
          })
        : new MysqlDialect({ pool: createPool({ uri: place.url, connectionLimit: 2 }) }),
  });
}

for (const dialect of ['postgres', 'mysql', 'sqlite'] as const) {
  describeOrm<Transaction<Database>>(
    'Kysely',
    dialect,
    async (place, store) => {
      const db = openKysely(place, store);
      return {
        transaction: (fn) => asyncTransaction(db, fn),
        executor: kyselyTx,
        insertOrder: async (trx, note) => void (await trx.insertInto('orders').values({ note }).execute()),
        ...(dialect === 'sqlite' ? {} : { transactions: kyselyTransactions(db) }),
        // On SQLite the handle is the store's, closed with it.
        close: () => (dialect === 'sqlite' ? Promise.resolve() : db.destroy()),
      };
    },
    { transactionalExecutors: dialect !== 'sqlite' },
  );
}

/** Types only (never called): `ctx.tx` is the opener's transaction object, and must match it. */
export function kyselyOpenerTypes(db: Kysely<Database>): void {
  defineTransactionalExecutor<Transaction<Database>>()<'types.ok', { n: number }>({
    type: 'types.ok',
    transactional: kyselyTransactions(db),
    execute: async (_p, ctx) => {
      expectTypeOf(ctx.tx).toEqualTypeOf<Transaction<Database>>();
      await ctx.tx.insertInto('orders').values({ note: 'n' }).execute();
    },
  });
  defineTransactionalExecutor<pg.PoolClient>()<'types.wrong', { n: number }>({
    type: 'types.wrong',
    // @ts-expect-error a Kysely opener hands out a Transaction<Database>, not the declared handle type
    transactional: kyselyTransactions(db),
    execute: async (_p, ctx) => void (await ctx.tx.query('SELECT 1')),
  });
}
