import { asyncTransaction, kyselyTx } from '@asynccmd/kysely';
import type { SqliteCommandStore } from '@asynccmd/adapter-sqlite';
import type { CommandStore } from '@asynccmd/core';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect } from 'kysely';
import type { Generated, Transaction } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';
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
  describeOrm<Transaction<Database>>('Kysely', dialect, async (place, store) => {
    const db = openKysely(place, store);
    return {
      transaction: (fn) => asyncTransaction(db, fn),
      executor: kyselyTx,
      insertOrder: async (trx, note) => void (await trx.insertInto('orders').values({ note }).execute()),
      // On SQLite the handle is the store's, closed with it.
      close: () => (dialect === 'sqlite' ? Promise.resolve() : db.destroy()),
    };
  });
}
