import 'reflect-metadata';
import { asyncTransaction, typeormTransactions, typeormTx } from '@asynccmd/typeorm';
import { defineTransactionalExecutor } from '@asynccmd/runtime';
import type pg from 'pg';
import { DataSource } from 'typeorm';
import type { EntityManager } from 'typeorm';
import { expectTypeOf } from 'vitest';
import { describeOrm } from './suite.js';

for (const dialect of ['postgres', 'mysql', 'sqlite'] as const) {
  describeOrm<EntityManager>(
    'TypeORM',
    dialect,
    async (place) => {
      const dataSource =
        dialect === 'postgres'
          ? new DataSource({ type: 'postgres', url: place.url, schema: place.name, extra: { max: 2 } })
          : dialect === 'mysql'
            ? new DataSource({ type: 'mysql', url: place.url, extra: { connectionLimit: 2 } })
            : // A connection of TypeORM's own to the store's file (WAL; see docs/orm.md on SQLite).
              new DataSource({ type: 'better-sqlite3', database: place.url });
      await dataSource.initialize();
      const insert =
        dialect === 'postgres'
          ? `INSERT INTO "${place.name}".orders (note) VALUES ($1)`
          : 'INSERT INTO orders (note) VALUES (?)';
      return {
        transaction: (fn) => asyncTransaction(dataSource, fn),
        executor: typeormTx,
        insertOrder: async (em, note) => void (await em.query(insert, [note])),
        ...(dialect === 'sqlite' ? {} : { transactions: typeormTransactions(dataSource) }),
        close: () => dataSource.destroy(),
      };
    },
    { transactionalExecutors: dialect !== 'sqlite' },
  );
}

/** Types only (never called): `ctx.tx` is the opener's EntityManager, and must match it. */
export function typeormOpenerTypes(dataSource: DataSource): void {
  defineTransactionalExecutor<EntityManager>()<'types.ok', { n: number }>({
    type: 'types.ok',
    transactional: typeormTransactions(dataSource),
    execute: async (_p, ctx) => {
      expectTypeOf(ctx.tx).toEqualTypeOf<EntityManager>();
      await ctx.tx.query('INSERT INTO orders (note) VALUES (?)', ['n']);
    },
  });
  defineTransactionalExecutor<pg.PoolClient>()<'types.wrong', { n: number }>({
    type: 'types.wrong',
    // @ts-expect-error a TypeORM opener hands out an EntityManager, not the declared handle type
    transactional: typeormTransactions(dataSource),
    execute: async (_p, ctx) => void (await ctx.tx.query('SELECT 1')),
  });
}
