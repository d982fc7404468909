import { asyncTransaction, kyselyTx } from '@asynccmd/kysely';
import { Kysely, MysqlDialect, PostgresDialect } from 'kysely';
import type { Generated, Transaction } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';
import { describeOrm, type Place } from './suite.js';

interface Database {
  orders: { id: Generated<number>; note: string };
}

function openKysely(place: Place): Kysely<Database> {
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

for (const dialect of ['postgres', 'mysql'] as const) {
  describeOrm<Transaction<Database>>('Kysely', dialect, async (place) => {
    const db = openKysely(place);
    return {
      transaction: (fn) => asyncTransaction(db, fn),
      executor: kyselyTx,
      insertOrder: async (trx, note) => void (await trx.insertInto('orders').values({ note }).execute()),
      close: () => db.destroy(),
    };
  });
}
