import type { Connection, Pool } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMysqlStore } from '../src/index.js';
import type { MysqlCommandStore } from '../src/store.js';
import { admin, freshDatabase, poolWithSession, perProcess } from './databases.js';

const DATABASE = perProcess('asynccmd_mysql_lock_conflicts');

/**
 * Real deadlocks and lock-wait timeouts, provoked by another connection holding row locks: the
 * store retries them and its caller sees only the outcome, never error 1213 or 1205.
 */
describe('lock conflicts are retried, not surfaced', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let pool: Pool;
  let store: MysqlCommandStore;

  beforeAll(async () => {
    db = await freshDatabase(DATABASE);
    // Lock waits give up after a second here (50 s by default), so a timeout happens within the test.
    pool = poolWithSession(db.url, 'SET SESSION innodb_lock_wait_timeout = 1');
    store = createMysqlStore({ pool });
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
    await pool?.end();
    await db?.drop();
  });

  async function claimed(type: string, n: number) {
    await store.transaction((tx) =>
      store.insert(
        tx,
        Array.from({ length: n }, () => ({ type, payloadJson: '{}', maxRetry: 1 })),
      ),
    );
    const token = `${type}-token`;
    const rows = await store.claimDue({
      types: [type],
      limit: n,
      now: new Date(Date.now() + 1000),
      token,
      leaseMs: 60_000,
    });
    expect(rows).toHaveLength(n);
    return rows.map((r) => ({ id: r.id, token }));
  }

  async function withBlocker<T>(fn: (blocker: Connection) => Promise<T>): Promise<T> {
    return admin(async (c) => {
      await c.query(`USE \`${DATABASE}\``);
      await c.query('START TRANSACTION');
      try {
        return await fn(c);
      } finally {
        await c.query('ROLLBACK').catch(() => undefined);
      }
    });
  }

  it('a lock-wait timeout (1205) is waited out and retried', async () => {
    const refs = await claimed('waited', 1);
    const done = await withBlocker(async (blocker) => {
      await blocker.query('SELECT id FROM async_command WHERE id = ? FOR UPDATE', [refs[0]?.id]);
      const completing = store.complete(refs);
      await new Promise((r) => setTimeout(r, 1_400)); // past one lock-wait timeout
      await blocker.query('ROLLBACK');
      return completing;
    });
    expect(done).toEqual([refs[0]?.id]);
    expect((await store.get(refs[0]?.id as string))?.status).toBe('SUCCESS');
  }, 20_000);

  it('a deadlock victim (1213) is retried', async () => {
    const deadlocks = async () =>
      admin(async (c) => {
        const [rows] = await c.query("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'");
        return Number((rows as { Value: string }[])[0]?.Value ?? 0);
      });
    const before = await deadlocks();
    const refs = await claimed('deadlocked', 40);
    const first = refs[0]?.id as string;
    const last = refs[refs.length - 1]?.id as string;
    const done = await withBlocker(async (blocker) => {
      // The blocker writes every row but the first (by primary key range, so it locks only those):
      // the heavier transaction, which InnoDB keeps when it breaks the cycle.
      await blocker.query("UPDATE async_command SET last_error = 'blocker' WHERE id > ? AND id <= ?", [
        first,
        last,
      ]);
      // complete locks the rows in id order: it gets the first and waits for the last one...
      const completing = store.complete(refs);
      await new Promise((r) => setTimeout(r, 150));
      // ...which the blocker now closes into a cycle by asking for the first one.
      await blocker.query('SELECT id FROM async_command WHERE id = ? FOR UPDATE', [first]);
      await blocker.query('ROLLBACK');
      return completing;
    });
    expect(done.sort()).toEqual(refs.map((r) => r.id).sort());
    expect(await deadlocks()).toBeGreaterThan(before);
  }, 20_000);
});
