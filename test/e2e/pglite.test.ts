import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PGlite } from '@electric-sql/pglite';
import type { Transaction } from '@electric-sql/pglite';
import { createPgliteStore, type PgliteCommandStore } from '@asynccmd/adapter-pglite';
import { createAsyncCommands, defineExecutor, defineTransactionalExecutor } from '@asynccmd/runtime';
import type { CommandStatus } from '@asynccmd/core';

/*
 * The runtime on PGlite, end to end in one process (the suite of test/e2e/suite.ts runs worker
 * processes, which an in-process database cannot have): submits in the application's transaction,
 * the runtime drains them, every command SUCCESS once; two instances on one database share the work.
 */

let db: PGlite;

beforeAll(async () => {
  db = await PGlite.create();
  await db.exec('CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)');
});

afterAll(async () => {
  await db.close();
});

async function statuses(store: PgliteCommandStore, type: string): Promise<CommandStatus[]> {
  const page = await store.list({ type, limit: 500 });
  return page.items.map((c) => c.status);
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('the runtime on PGlite', () => {
  it('runs what a committed transaction submitted, once each, and nothing of a rolled-back one', async () => {
    const store = createPgliteStore({ db, schema: 'e2e_drain' });
    await store.migrate();
    const ran: string[] = [];
    const ship = defineExecutor<'order.ship', { orderId: string }>({
      type: 'order.ship',
      mode: 'IMMEDIATE',
      async execute({ orderId }) {
        ran.push(orderId);
      },
    });
    const remind = defineExecutor<'order.remind', { orderId: string }>({
      type: 'order.remind',
      async execute({ orderId }) {
        ran.push(`remind ${orderId}`);
      },
    });
    const commands = createAsyncCommands({ store, executors: [ship, remind], pollIntervalMs: 50 });
    commands.start();
    try {
      for (let i = 0; i < 20; i++) {
        await commands.client.transaction(async (tx, submit) => {
          await tx.query('INSERT INTO orders (id, status) VALUES ($1, $2)', [`o-${i}`, 'PAID']);
          await submit('order.ship', { orderId: `o-${i}` });
          await submit('order.remind', { orderId: `o-${i}` });
        });
      }
      await expect(
        commands.client.transaction(async (tx, submit) => {
          await tx.query('INSERT INTO orders (id, status) VALUES ($1, $2)', ['o-gone', 'PAID']);
          await submit('order.ship', { orderId: 'o-gone' });
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      await until('every command SUCCESS', async () => {
        const all = [...(await statuses(store, 'order.ship')), ...(await statuses(store, 'order.remind'))];
        return all.length === 40 && all.every((s) => s === 'SUCCESS');
      });
      expect(ran).toHaveLength(40);
      expect(new Set(ran).size).toBe(40);
      expect(ran).not.toContain('o-gone');
      expect((await db.query('SELECT id FROM orders WHERE id = $1', ['o-gone'])).rows).toEqual([]);
    } finally {
      await commands.stop();
    }
  });

  it('commits a transactional executor’s writes with its SUCCESS, two instances on one database running each command once', async () => {
    const stores = [0, 1].map(() => createPgliteStore({ db, schema: 'e2e_shared' }));
    await stores[0]!.migrate();
    const ranBy: number[] = [];
    const instances = stores.map((store, n) => {
      const pack = defineTransactionalExecutor<Transaction>()<'order.pack', { orderId: string }>({
        type: 'order.pack',
        transactional: true,
        async execute({ orderId }, ctx) {
          await ctx.tx.query('UPDATE orders SET status = $1 WHERE id = $2', ['PACKED', orderId]);
          ranBy.push(n);
        },
      });
      return createAsyncCommands({ store, executors: [pack], pollIntervalMs: 50 });
    });
    for (const instance of instances) instance.start();
    try {
      const [first] = instances;
      for (let i = 0; i < 30; i++) {
        await first!.client.transaction(async (tx, submit) => {
          await tx.query('INSERT INTO orders (id, status) VALUES ($1, $2)', [`p-${i}`, 'PAID']);
          await submit('order.pack', { orderId: `p-${i}` });
        });
      }
      await until('every pack SUCCESS', async () => {
        const all = await statuses(stores[0]!, 'order.pack');
        return all.length === 30 && all.every((s) => s === 'SUCCESS');
      });
      expect(ranBy).toHaveLength(30);
      const packed = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM orders WHERE id LIKE 'p-%' AND status = 'PACKED'",
      );
      expect(packed.rows[0]?.n).toBe(30);
    } finally {
      await Promise.all(instances.map((i) => i.stop()));
    }
  });
});
