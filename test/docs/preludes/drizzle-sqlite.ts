// Drizzle's `orders` table on SQLite (created in app.db, the `commands` prelude's file), and an
// `order` to insert.
import PreludeDatabase from 'better-sqlite3';
import * as preludeSqliteCore from 'drizzle-orm/sqlite-core';

export const orders = preludeSqliteCore.sqliteTable('orders', {
  id: preludeSqliteCore.text('id').primaryKey(),
  status: preludeSqliteCore.text('status').notNull(),
});
export const order = { id: 'o-42', status: 'PAID' };
const preludeDb = new PreludeDatabase('app.db');
preludeDb.exec('CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)');
preludeDb.close();
