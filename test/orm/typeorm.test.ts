import 'reflect-metadata';
import { asyncTransaction, typeormTx } from '@asynccmd/typeorm';
import { DataSource } from 'typeorm';
import type { EntityManager } from 'typeorm';
import { describeOrm } from './suite.js';

for (const dialect of ['postgres', 'mysql', 'sqlite'] as const) {
  describeOrm<EntityManager>('TypeORM', dialect, async (place) => {
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
      close: () => dataSource.destroy(),
    };
  });
}
