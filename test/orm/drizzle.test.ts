import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { asyncTransaction, drizzleTransactions, drizzleTx } from '@asynccmd/drizzle';
import { createAsyncCommands, defineExecutor, defineTransactionalExecutor } from '@asynccmd/runtime';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import { integer, sqliteTable, text as sqliteText } from 'drizzle-orm/sqlite-core';
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2';
import { int, mysqlTable, text as mysqlText } from 'drizzle-orm/mysql-core';
import { drizzle as drizzlePg, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { pgSchema, serial, text } from 'drizzle-orm/pg-core';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { describeOrm, type OrmSubject } from './suite.js';

describeOrm(
  'Drizzle',
  'postgres',
  async (place) => {
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
      transactions: drizzleTransactions(db),
      close: () => pool.end(),
    };
    return subject;
  },
  { transactionalExecutors: true },
);

describeOrm(
  'Drizzle',
  'mysql',
  async (place) => {
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
      transactions: drizzleTransactions(db),
      close: () => pool.end(),
    };
    return subject;
  },
  { transactionalExecutors: true },
);

/**
 * Drizzle on better-sqlite3 runs its transactions synchronously (better-sqlite3 refuses a
 * transaction function that returns a promise), so a submit, which is async, cannot run inside
 * one. Its queries are synchronous too: on the store's own handle they run inside
 * `client.transaction`, which is the way to write both in one transaction.
 */
describe('Drizzle on sqlite, through client.transaction on the store’s handle', () => {
  const orders = sqliteTable('orders', {
    id: integer('id').primaryKey(),
    note: sqliteText('note').notNull(),
  });
  const ran: string[] = [];
  const ship = defineExecutor<'orm.ship', { orderNote: string }>({
    type: 'orm.ship',
    mode: 'IMMEDIATE',
    execute: (p) => void ran.push(p.orderNote),
  });
  const dir = mkdtempSync(join(tmpdir(), 'orm-drizzle-sqlite-'));
  const store = createSqliteStore({ filename: join(dir, 'app.db') });
  const db = drizzleSqlite({ client: store.db });
  const commands = createAsyncCommands({ store, executors: [ship] as const, pollIntervalMs: 600_000 });

  beforeAll(async () => {
    await store.migrate();
    store.db.exec('CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT NOT NULL)');
    commands.start();
  });
  afterAll(async () => {
    await commands.stop({ timeoutMs: 2_000 });
    rmSync(dir, { recursive: true, force: true });
  });

  const notes = (): string[] =>
    db
      .select()
      .from(orders)
      .all()
      .map((o) => o.note);

  it('commits the business row and the command together; the IMMEDIATE command starts at commit', async () => {
    const id = await commands.client.transaction(async (_tx, submit) => {
      db.insert(orders).values({ note: 'committed' }).run();
      return submit('orm.ship', { orderNote: 'committed' });
    });
    const until = Date.now() + 10_000;
    while (!ran.includes('committed')) {
      if (Date.now() > until) throw new Error('timed out waiting for the command to run');
      await new Promise((r) => setTimeout(r, 2));
    }
    expect(notes()).toEqual(['committed']);
    expect(await store.get(id)).toMatchObject({ type: 'orm.ship' });
  });

  it('rolls back the business row and the command together', async () => {
    let id = '';
    await expect(
      commands.client.transaction(async (_tx, submit) => {
        db.insert(orders).values({ note: 'rolled back' }).run();
        id = await submit('orm.ship', { orderNote: 'rolled back' });
        throw new Error('business rule failed');
      }),
    ).rejects.toThrow('business rule failed');
    expect(await store.get(id)).toBeNull();
    expect(notes()).toEqual(['committed']);
    await commands.runRound();
    expect(ran).not.toContain('rolled back');
  });
});

/** Types only (never called): `ctx.tx` is the opener's Drizzle transaction, and must match it. */
export function drizzleOpenerTypes(db: NodePgDatabase): void {
  type Tx = Parameters<Parameters<typeof db.transaction>[0]>[0];
  const orders = pgSchema('types').table('orders', { id: serial('id').primaryKey(), note: text('note') });
  defineTransactionalExecutor<Tx>()<'types.ok', { n: number }>({
    type: 'types.ok',
    transactional: drizzleTransactions(db),
    execute: async (_p, ctx) => {
      expectTypeOf(ctx.tx).toEqualTypeOf<Tx>();
      await ctx.tx.insert(orders).values({ note: 'n' });
    },
  });
  defineTransactionalExecutor<pg.PoolClient>()<'types.wrong', { n: number }>({
    type: 'types.wrong',
    // @ts-expect-error a Drizzle opener hands out its transaction, not the declared handle type
    transactional: drizzleTransactions(db),
    execute: async (_p, ctx) => void (await ctx.tx.query('SELECT 1')),
  });
}
