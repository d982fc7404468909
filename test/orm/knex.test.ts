import { asyncTransaction, knexTx } from '@asynccmd/knex';
import knex from 'knex';
import type { Knex } from 'knex';
import { describeOrm, type Place } from './suite.js';

function openKnex(place: Place): Knex {
  // SQLite: a connection of Knex's own to the store's file (WAL; see docs/orm.md on SQLite).
  if (place.dialect === 'sqlite') {
    return knex({ client: 'better-sqlite3', connection: { filename: place.url }, useNullAsDefault: true });
  }
  return place.dialect === 'postgres'
    ? knex({ client: 'pg', connection: place.url, searchPath: [place.name], pool: { min: 0, max: 2 } })
    : knex({ client: 'mysql2', connection: place.url, pool: { min: 0, max: 2 } });
}

for (const dialect of ['postgres', 'mysql', 'sqlite'] as const) {
  describeOrm<Knex.Transaction>('Knex', dialect, async (place) => {
    const db = openKnex(place);
    return {
      transaction: (fn) => asyncTransaction(db, fn),
      executor: knexTx,
      insertOrder: async (trx, note) => void (await trx('orders').insert({ note })),
      close: () => db.destroy(),
    };
  });
}
