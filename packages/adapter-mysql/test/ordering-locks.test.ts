import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConnection } from 'mysql2/promise';
import type { Connection } from 'mysql2/promise';
import type { MysqlCommandStore } from '../src/store.js';
import { admin, freshDatabase, openStore, perProcess } from './databases.js';

const DATABASE = perProcess('asynccmd_mysql_ordering_locks');

const claimOf = (store: MysqlCommandStore, type: string) =>
  store.claimDue({
    types: [type],
    limit: 10,
    now: new Date(Date.now() + 60_000),
    token: `t${Math.random()}`,
    leaseMs: 60_000,
  });

/**
 * Polls the server until a session on `database` is inside the key-slot lock statement (waiting on
 * the lock: the statement is a primary-key lookup of one row), or gives up; whether one was seen.
 */
async function waitingOnKeySlot(database: string): Promise<boolean> {
  return admin(async (conn) => {
    for (let i = 0; i < 500; i++) {
      const [rows] = await conn.query(
        `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST
         WHERE DB = ? AND INFO LIKE 'SELECT slot FROM %key_locks%FOR UPDATE'`,
        [database],
      );
      if (Number((rows as { n: number }[])[0]?.n) > 0) return true;
      await new Promise((r) => setTimeout(r, 10));
    }
    return false;
  });
}

/**
 * The ordering-key check of a claim reads the earlier commands of a key without skipping the ones
 * another claimer has locked: a head of key that another claim is taking still holds the key.
 */
describe('ordering keys under row locks (MySQL)', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let store: MysqlCommandStore;
  let holder: Connection;

  beforeAll(async () => {
    db = await freshDatabase(DATABASE);
    store = await openStore(db.url, { claimStrategy: 'skip-locked' });
    holder = await createConnection({ uri: db.url, supportBigNumbers: true, bigNumberStrings: true });
  });
  afterAll(async () => {
    await holder?.end();
    await store?.close();
    await db?.drop();
  });

  it('a head of key locked by another claimer is skipped, and the rest of its key waits', async () => {
    const type = 'locked.head';
    const [head, next] = await store.transaction((tx) =>
      store.insert(tx, [
        { type, payloadJson: '{}', maxRetry: 0, orderingKey: 'k' },
        { type, payloadJson: '{}', maxRetry: 0, orderingKey: 'k' },
      ]),
    );
    await holder.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
    await holder.query('START TRANSACTION');
    await holder.query('SELECT id FROM async_command WHERE id = ? FOR UPDATE', [head]);
    try {
      expect(await claimOf(store, type)).toEqual([]);
    } finally {
      await holder.query('ROLLBACK');
    }
    expect((await claimOf(store, type)).map((c) => c.id)).toEqual([head]);
    expect((await store.get(next!))?.status).toBe('PENDING');
  });

  it('a keyed submit waits for an uncommitted submit of the same key, so ids follow commit order', async () => {
    const type = 'slot.order';
    const first = await store.transaction(async (tx) => {
      const [id] = await store.insert(tx, [{ type, payloadJson: '{}', maxRetry: 0, orderingKey: 'slot' }]);
      // A second submitter of the key, on its own connection, while this transaction is open.
      const second = store.transaction((other) =>
        store.insert(other, [{ type, payloadJson: '{}', maxRetry: 0, orderingKey: 'slot' }]),
      );
      let done = false;
      void second.then(() => (done = true));
      // It waits on the key's slot lock (seen by the server, polled; no timing involved).
      expect(await waitingOnKeySlot(DATABASE)).toBe(true);
      expect(done).toBe(false);
      return { id, second };
    });
    const [secondId] = await first.second;
    expect(BigInt(secondId!)).toBeGreaterThan(BigInt(first.id!));
  });
});
