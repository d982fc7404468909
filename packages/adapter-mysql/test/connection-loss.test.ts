import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MysqlCommandStore } from '../src/store.js';
import { admin, freshDatabase, openStore, perProcess } from './databases.js';

const DATABASE = perProcess('asynccmd_mysql_connection_loss');
const ROWS = 2000;

/** Kills every connection the stores hold on this test's database, as a failover or a DBA would. */
async function killStoreConnections(): Promise<number> {
  return admin(async (c) => {
    const [rows] = await c.query(
      'SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()',
      [DATABASE],
    );
    let killed = 0;
    for (const { id } of rows as { id: number }[]) {
      try {
        await c.query(`KILL CONNECTION ${Number(id)}`);
        killed += 1;
      } catch {
        // It ended on its own meanwhile.
      }
    }
    return killed;
  });
}

describe('connection loss', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  const stores: MysqlCommandStore[] = [];
  const uncaught: unknown[] = [];
  const onUncaught = (e: unknown): void => void uncaught.push(e);

  beforeAll(async () => {
    process.on('uncaughtException', onUncaught);
    process.on('unhandledRejection', onUncaught);
    db = await freshDatabase(DATABASE);
    stores.push(
      await openStore(db.url, { connectionLimit: 3 }),
      await openStore(db.url, { connectionLimit: 3 }),
    );
  });
  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    process.off('unhandledRejection', onUncaught);
    await Promise.all(stores.map((s) => s.close()));
    await db?.drop();
  });

  it('idle connections killed under the pool: the next operations recover, nothing crashes', async () => {
    const store = stores[0] as MysqlCommandStore;
    const claimIdle = (token: string) =>
      store.claimDue({ types: ['idle'], limit: 5, now: new Date(Date.now() + 1000), token, leaseMs: 60_000 });
    // The claim connections too: they are a pool of their own.
    await Promise.all([store.ping(), store.ping(), store.ping(), claimIdle('idle-0'), claimIdle('idle-1')]);
    expect(await killStoreConnections()).toBeGreaterThan(3);
    await new Promise((r) => setTimeout(r, 50));
    await store.ping();
    expect((await store.now()).getTime()).toBeGreaterThan(0);
    const [id] = await store.transaction((tx) =>
      store.insert(tx, [{ type: 'idle', payloadJson: '{}', maxRetry: 1 }]),
    );
    expect((await claimIdle('idle-2')).map((c) => c.id)).toEqual([id]);
    expect(uncaught).toEqual([]);
  });

  it('connections killed mid-drain: draining resumes by itself, nothing lost, nothing left RUNNING', async () => {
    const first = stores[0] as MysqlCommandStore;
    const ids = await first.transaction((tx) =>
      first.insert(
        tx,
        Array.from({ length: ROWS }, (_, i) => ({
          type: 'work',
          payloadJson: JSON.stringify({ i }),
          maxRetry: 3,
        })),
      ),
    );
    const completed = new Map<string, number>();
    const failures: unknown[] = [];
    let stop = false;
    let round = 0;
    // What the runtime's scheduler does, reduced: reclaim, claim, complete; a failed round is logged and retried.
    const drain = async (store: MysqlCommandStore, n: number): Promise<void> => {
      while (!stop) {
        try {
          await store.reclaimHung({ limit: 100, maxRescues: 100 });
          const token = `drain-${n}-${round++}`;
          const claimed = await store.claimDue({
            types: ['work'],
            limit: 20,
            now: new Date(Date.now() + 1000),
            token,
            leaseMs: 1500,
          });
          if (claimed.length === 0) {
            await new Promise((r) => setTimeout(r, 20));
            continue;
          }
          for (const id of await store.complete(claimed.map((c) => ({ id: c.id, token })))) {
            completed.set(id, (completed.get(id) ?? 0) + 1);
          }
        } catch (e) {
          failures.push(e);
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    };
    const loops = stores.map((s, n) => drain(s, n));
    let kills = 0;
    for (let i = 0; i < 4; i++) {
      await new Promise((r) => setTimeout(r, 60));
      kills += await killStoreConnections();
    }
    const deadline = Date.now() + 30_000;
    let success = 0;
    while (Date.now() < deadline) {
      const stats = await first.stats(new Date());
      success = stats.counts.find((c) => c.status === 'SUCCESS')?.count ?? 0;
      if (success === ROWS) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    stop = true;
    await Promise.all(loops);

    expect(kills).toBeGreaterThan(0);
    expect(success).toBe(ROWS);
    const records = await first.getMany(ids);
    expect(records.filter((r) => r.status !== 'SUCCESS')).toEqual([]);
    // Every completion this drain reported is a real one, and none twice.
    expect([...completed.values()].filter((n) => n > 1)).toEqual([]);
    expect(uncaught).toEqual([]);
    console.info(`connection loss: ${kills} connections killed, ${failures.length} failed rounds retried`);
    // Whatever surfaced was the lost connection itself, never a command's failure.
    for (const f of failures)
      expect(String((f as Error).message)).toMatch(/connection|closed|killed|ECONNRESET|EPIPE|socket/i);
  }, 60_000);
});
