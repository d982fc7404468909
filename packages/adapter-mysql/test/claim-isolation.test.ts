import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MysqlCommandStore } from '../src/store.js';
import { admin, freshDatabase, openStore, perProcess } from './databases.js';

const DATABASE = perProcess('asynccmd_mysql_claim_isolation');

/** MySQL 8 names it transaction_isolation; MariaDB 10.11 only knows tx_isolation. */
async function isolationVariable(): Promise<string> {
  return admin(async (c) => {
    try {
      await c.query('SELECT @@transaction_isolation');
      return 'transaction_isolation';
    } catch {
      return 'tx_isolation';
    }
  });
}

async function connectionsOnDatabase(): Promise<number> {
  return admin(async (c) => {
    const [rows] = await c.query(
      'SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()',
      [DATABASE],
    );
    return Number((rows as { n: number }[])[0]?.n);
  });
}

/**
 * A store that builds its own pool claims on connections whose sessions are READ COMMITTED (set
 * once when each connects), while the caller's transactions keep the server's default isolation.
 */
describe('claim connections', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let store: MysqlCommandStore;
  let variable: string;

  beforeAll(async () => {
    db = await freshDatabase(DATABASE);
    variable = await isolationVariable();
    store = await openStore(db.url, { claimStrategy: 'skip-locked' });
    // Every claimed row records the isolation of the session that marked it.
    await admin(async (c) => {
      await c.query(`CREATE TABLE \`${DATABASE}\`.marked_by (isolation VARCHAR(32) NOT NULL)`);
      await c.query(
        `CREATE TRIGGER \`${DATABASE}\`.record_isolation BEFORE UPDATE ON \`${DATABASE}\`.async_command
         FOR EACH ROW INSERT INTO \`${DATABASE}\`.marked_by VALUES (@@SESSION.${variable})`,
      );
    });
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  it('claims run READ COMMITTED; the caller-facing transaction() keeps the server default', async () => {
    const serverDefault = await admin(async (c) => {
      const [rows] = await c.query(`SELECT @@GLOBAL.${variable} AS isolation`);
      return (rows as { isolation: string }[])[0]?.isolation;
    });
    // Otherwise this test could not tell the two apart.
    expect(serverDefault).not.toBe('READ-COMMITTED');

    const ids = await store.transaction((tx) =>
      store.insert(
        tx,
        Array.from({ length: 3 }, () => ({ type: 'iso', payloadJson: '{}', maxRetry: 1 })),
      ),
    );
    const claimed = await store.claimDue({
      types: ['iso'],
      limit: 10,
      now: new Date(Date.now() + 1000),
      token: 'iso-round',
      leaseMs: 60_000,
    });
    expect(claimed.map((c) => c.id)).toEqual(ids);
    expect(claimed.every((c) => c.status === 'RUNNING' && c.claimToken === 'iso-round')).toBe(true);
    const marked = await admin(async (c) => {
      const [rows] = await c.query(`SELECT isolation FROM \`${DATABASE}\`.marked_by`);
      return (rows as { isolation: string }[]).map((r) => r.isolation);
    });
    expect(marked).toEqual(['READ-COMMITTED', 'READ-COMMITTED', 'READ-COMMITTED']);

    const inTransaction = await store.transaction(async (tx) => {
      const [rows] = await tx.query(`SELECT @@SESSION.${variable} AS isolation`);
      return (rows as { isolation: string }[])[0]?.isolation;
    });
    expect(inTransaction).toBe(serverDefault);
  });

  it('close() ends the claim connections along with the rest', async () => {
    await store.claimDue({
      types: ['iso'],
      limit: 10,
      now: new Date(Date.now() + 1000),
      token: 'iso-empty',
      leaseMs: 60_000,
    });
    expect(await connectionsOnDatabase()).toBeGreaterThanOrEqual(2);
    await store.close();
    const deadline = Date.now() + 5_000;
    let left = await connectionsOnDatabase();
    while (left > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      left = await connectionsOnDatabase();
    }
    expect(left).toBe(0);
  });
});
