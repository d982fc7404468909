import type { Pool } from 'mysql2/promise';
import { createPool } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MysqlCommandStore } from '../src/store.js';
import { MysqlWakeups } from '../src/wakeups.js';
import { freshDatabase, openStore, perProcess } from './databases.js';

const DATABASE = perProcess('asynccmd_mysql_wakeups');

async function until(what: string, condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The polled wake-up probe: it wakes on other connections' submits, and rests while claims fill. */
describe('MySQL wake-up probe', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let store: MysqlCommandStore;
  let pool: Pool;
  let probes = 0;
  let counted: Pool;

  beforeAll(async () => {
    db = await freshDatabase(DATABASE);
    store = await openStore(db.url);
    pool = createPool({ uri: db.url, connectionLimit: 2 });
    // The probe's pool, counting the queries it sends.
    counted = new Proxy(pool, {
      get(target, name, receiver) {
        if (name !== 'query') return Reflect.get(target, name, receiver) as unknown;
        return (...args: Parameters<Pool['query']>) => {
          probes++;
          return target.query(...args);
        };
      },
    });
  });
  afterAll(async () => {
    await store?.close();
    await pool?.end();
    await db?.drop();
  });

  const submitElsewhere = (): Promise<unknown> =>
    store.transaction((tx) => store.insert(tx, [{ type: 'w', payloadJson: '{}', maxRetry: 0 }]));

  it('skips its query while every claimer’s latest claim came back full, and wakes once one is short', async () => {
    const wakeups = new MysqlWakeups(counted, 'async_command');
    let wakes = 0;
    const unsubscribe = await wakeups.subscribe(() => wakes++);
    try {
      await until('the probe to run', () => probes >= 2);
      wakeups.claimed(['w'], 10, 10);
      wakeups.claimed(['other'], 5, 5);
      const resting = probes;
      await submitElsewhere();
      await new Promise((resolve) => setTimeout(resolve, 100));
      // At most the probe that was already on its way when the claims filled.
      expect(probes - resting).toBeLessThanOrEqual(1);

      // One claimer came back short: it may sleep now, so the probe looks again and wakes it.
      wakeups.claimed(['other'], 5, 2);
      const before = wakes;
      await submitElsewhere();
      await until('a wake-up', () => wakes > before);
    } finally {
      await unsubscribe();
      wakeups.close();
    }
  });
});
