import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, openStore } from './databases.js';
import type { MysqlCommandStore } from '../src/store.js';

describe('smoke', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let store: MysqlCommandStore;
  beforeAll(async () => {
    db = await freshDatabase('asynccmd_mysql_smoke');
    store = await openStore(db.url);
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });
  it('submits, claims, completes', async () => {
    const ids = await store.transaction((tx) =>
      store.insert(tx, [
        { type: 'a', payloadJson: '{"x":1}', maxRetry: 3 },
        { type: 'a', payloadJson: '{"x":2}', maxRetry: 3, bizKey: 'k' },
      ]),
    );
    expect(ids).toHaveLength(2);
    const now = await store.now();
    const claimed = await store.claimDue({
      types: ['a'],
      limit: 10,
      now: new Date(now.getTime() + 1000),
      token: 't1',
      leaseMs: 30000,
    });
    expect(claimed.map((c) => c.id)).toEqual(ids);
    console.log(claimed[0]);
    expect(await store.complete(claimed.map((c) => ({ id: c.id, token: 't1' })))).toEqual(ids);
    expect(await store.complete(claimed.map((c) => ({ id: c.id, token: 't1' })))).toEqual([]);
    console.log(await store.stats(new Date()));
  });
});
