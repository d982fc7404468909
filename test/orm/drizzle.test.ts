import { asyncTransaction, drizzleTx } from '@asynccmd/drizzle';
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2';
import { int, mysqlTable, text as mysqlText } from 'drizzle-orm/mysql-core';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { pgSchema, serial, text } from 'drizzle-orm/pg-core';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { describeOrm, type OrmSubject } from './suite.js';

describeOrm('Drizzle', 'postgres', async (place) => {
  const orders = pgSchema(place.name).table('orders', {
    id: serial('id').primaryKey(),
    note: text('note').notNull(),
  });
  const pool = new pg.Pool({ connectionString: place.url, max: 2 });
  const db = drizzlePg(pool);
  type Tx = Parameters<Parameters<typeof db.transaction>[0]>[0];
  const subject: OrmSubject<Tx> = {
    transaction: (fn) => asyncTransaction(db, fn),
    executor: drizzleTx,
    insertOrder: async (tx, note) => void (await tx.insert(orders).values({ note })),
    close: () => pool.end(),
  };
  return subject;
});

describeOrm('Drizzle', 'mysql', async (place) => {
  const orders = mysqlTable('orders', {
    id: int('id').primaryKey().autoincrement(),
    note: mysqlText('note').notNull(),
  });
  const pool = mysql.createPool({ uri: place.url, connectionLimit: 2 });
  const db = drizzleMysql(pool);
  type Tx = Parameters<Parameters<typeof db.transaction>[0]>[0];
  const subject: OrmSubject<Tx> = {
    transaction: (fn) => asyncTransaction(db, fn),
    executor: drizzleTx,
    insertOrder: async (tx, note) => void (await tx.insert(orders).values({ note })),
    close: () => pool.end(),
  };
  return subject;
});
