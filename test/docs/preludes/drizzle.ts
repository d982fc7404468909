// `db` (Drizzle on node-postgres) and its `orders` table.
import type { NodePgDatabase } from 'drizzle-orm/node-postgres';
import * as preludePg from 'drizzle-orm/pg-core';

export const orders = preludePg.pgTable('orders', {
  id: preludePg.text('id').primaryKey(),
  status: preludePg.text('status').notNull(),
});
export declare const db: NodePgDatabase;
