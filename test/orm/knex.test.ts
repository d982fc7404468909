import { asyncTransaction, knexTransactions, knexTx } from '@asynccmd/knex';
import { defineTransactionalExecutor } from '@asynccmd/runtime';
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
  describeOrm<Knex.Transaction>(
    'Knex',
    dialect,
    async (place) => {
      const db = openKnex(place);
      return {
        transaction: (fn) => asyncTransaction(db, fn),
        executor: knexTx,
        insertOrder: async (trx, note) => void (await trx('orders').insert({ note })),
        ...(dialect === 'sqlite' ? {} : { transactions: knexTransactions(db) }),
        close: () => db.destroy(),
      };
    },
    { transactionalExecutors: dialect !== 'sqlite' },
  );
}

/** Types only (never called): `ctx.tx` is the opener's transaction object, and must match it. */
export function knexOpenerTypes(db: Knex): void {
  defineTransactionalExecutor<Knex.Transaction>()<'types.ok', { n: number }>({
    type: 'types.ok',
    transactional: knexTransactions(db),
    execute: async (_p, ctx) => void (await ctx.tx('orders').insert({ note: 'n' })),
  });
  defineTransactionalExecutor<{ query(text: string): Promise<unknown> }>()<'types.wrong', { n: number }>({
    type: 'types.wrong',
    // @ts-expect-error a Knex opener hands out a Knex.Transaction, not the declared handle type
    transactional: knexTransactions(db),
    execute: async (_p, ctx) => void (await ctx.tx.query('SELECT 1')),
  });
}
