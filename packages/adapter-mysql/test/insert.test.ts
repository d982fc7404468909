import { isAsyncCommandError } from '@asynccmd/core';
import type { NewCommand } from '@asynccmd/core';
import { createConnection } from 'mysql2/promise';
import type { Connection } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MysqlCommandStore } from '../src/store.js';
import { freshDatabase, openStore, perProcess } from './databases.js';

const batch = (n: number, type: string): NewCommand[] =>
  Array.from({ length: n }, (_, i) => ({
    type,
    payloadJson: JSON.stringify({ i, s: '订单😀' }),
    maxRetry: 1,
  }));

/** Submits on the caller's own mysql2 connection (not the store's pool), as an application does. */
describe('insert on a caller connection', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let store: MysqlCommandStore;
  let conn: Connection;

  beforeAll(async () => {
    db = await freshDatabase(perProcess('asynccmd_mysql_insert'));
    store = await openStore(db.url);
    // mysql2's defaults: no big-number strings, no date strings, local time zone.
    conn = await createConnection(db.url);
  });
  afterAll(async () => {
    await conn?.end();
    await store?.close();
    await db?.drop();
  });

  it('a batch larger than one statement, in autocommit, is written whole with the right ids in order', async () => {
    const ids = await store.insert(conn, batch(2500, 'big'));
    expect(ids).toHaveLength(2500);
    const records = await store.getMany(ids);
    expect(records.map((r) => r.id)).toEqual(ids);
    expect(records.map((r) => (r.payload as { i: number }).i)).toEqual(ids.map((_, i) => i));
    expect((records[0]?.payload as { s: string }).s).toBe('订单😀');
  });

  it('inside the caller transaction a multi-statement batch rolls back with it', async () => {
    await conn.query('START TRANSACTION');
    const ids = await store.insert(conn, batch(1500, 'rolled'));
    await conn.query('ROLLBACK');
    expect(await store.getMany(ids)).toEqual([]);
    const page = await store.list({ type: 'rolled' });
    expect(page.items).toEqual([]);
  });

  it('ids follow the session auto_increment_increment', async () => {
    await conn.query('SET SESSION auto_increment_increment = 3');
    try {
      const ids = await store.insert(conn, batch(5, 'stepped'));
      const records = await store.getMany(ids);
      expect(records.map((r) => r.id)).toEqual(ids);
      expect(records.map((r) => (r.payload as { i: number }).i)).toEqual([0, 1, 2, 3, 4]);
    } finally {
      await conn.query('SET SESSION auto_increment_increment = 1');
    }
  });

  it('refuses text wider than its column with a typed error, writing nothing', async () => {
    for (const over of [{ bizKey: 'k'.repeat(256) }, { type: 't'.repeat(129) }, { owner: 'o'.repeat(129) }]) {
      const attempt = store.insert(conn, [{ type: 'wide', payloadJson: '{}', maxRetry: 0, ...over }]);
      await expect(attempt).rejects.toSatisfy(
        (e: unknown) => isAsyncCommandError(e) && e.code === 'INVALID_ARGUMENT',
      );
    }
    // 255 characters of four-byte text fit (the column counts characters).
    const [id] = await store.insert(conn, [
      { type: 'wide', payloadJson: '{}', maxRetry: 0, bizKey: '😀'.repeat(255) },
    ]);
    expect((await store.get(id as string))?.bizKey).toBe('😀'.repeat(255));
  });

  it('an idempotent submit on the caller connection sees a holder committed after its snapshot', async () => {
    await conn.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
    await conn.query('START TRANSACTION');
    await conn.query('SELECT COUNT(*) FROM async_command'); // fixes the snapshot
    const holder = await store.transaction((tx) =>
      store.insertIdempotent(tx, { type: 'snap', payloadJson: '{}', maxRetry: 0, bizKey: 'b' }),
    );
    const again = await store.insertIdempotent(conn, {
      type: 'snap',
      payloadJson: '{}',
      maxRetry: 0,
      bizKey: 'b',
    });
    await conn.query('COMMIT');
    expect(again).toEqual({ id: holder.id, duplicate: true, replaced: false });
  });
});
