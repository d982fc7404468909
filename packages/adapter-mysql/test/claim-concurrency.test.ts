import type { NewCommand } from '@asynccmd/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimStrategyName } from '../src/index.js';
import type { MysqlCommandStore } from '../src/store.js';
import { admin, freshDatabase, openStore, perProcess } from './databases.js';

async function deadlocks(): Promise<number> {
  return admin(async (c) => {
    const [rows] = await c.query("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'");
    return Number((rows as { Value: string }[])[0]?.Value ?? 0);
  });
}

const ROWS = 3000;
const CLAIMERS = 8;

/**
 * Eight instances, each with its own pool, drain thousands of due commands at once: no row may be
 * handed out twice, none may be left behind, and no deadlock or lock-wait error may reach a caller.
 */
/**
 * The third row claims through candidates read without locks (sql.ts lockDueUnlocked) after the
 * first claim from the head: a slowMs of 0 makes every claim from the head count as slow.
 */
describe.each<[string, ClaimStrategyName, { slowMs: number } | undefined]>([
  ['skip-locked', 'skip-locked', undefined],
  ['legacy', 'legacy', undefined],
  ['skip-locked, candidates read without locks', 'skip-locked', { slowMs: 0 }],
])('concurrent claims (%s)', (name, strategy, slowHeadSkip) => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  const stores: MysqlCommandStore[] = [];

  beforeAll(async () => {
    db = await freshDatabase(
      perProcess(`asynccmd_mysql_claims_${strategy.replace('-', '_')}${slowHeadSkip ? '_unlocked' : ''}`),
    );
    for (let i = 0; i < CLAIMERS; i++) {
      stores.push(await openStore(db.url, { claimStrategy: strategy, connectionLimit: 2, slowHeadSkip }));
    }
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await db?.drop();
  });

  it(`${CLAIMERS} claimers share ${ROWS} rows without a double claim`, async () => {
    const first = stores[0] as MysqlCommandStore;
    expect((await first.claimStrategy()).name).toBe(strategy);
    const batch: NewCommand[] = Array.from({ length: ROWS }, (_, i) => ({
      type: i % 2 ? 'odd' : 'even',
      payloadJson: JSON.stringify({ i }),
      maxRetry: 0,
    }));
    const ids = await first.transaction((tx) => first.insert(tx, batch));
    expect(new Set(ids).size).toBe(ROWS);

    const now = new Date((await first.now()).getTime() + 1000);
    const deadlocksBefore = await deadlocks();
    const started = Date.now();
    const seen = new Map<string, number>();
    const errors: unknown[] = [];
    await Promise.all(
      stores.map(async (store, n) => {
        let empty = 0;
        let round = 0;
        while (empty < 3) {
          try {
            const token = `claimer-${n}-${round++}`;
            const claimed = await store.claimDue({
              types: ['odd', 'even'],
              limit: 25,
              now,
              token,
              leaseMs: 60_000,
            });
            if (claimed.length === 0) {
              empty += 1;
              continue;
            }
            empty = 0;
            for (const c of claimed) seen.set(c.id, (seen.get(c.id) ?? 0) + 1);
            const done = await store.complete(claimed.map((c) => ({ id: c.id, token })));
            expect(done.sort()).toEqual(claimed.map((c) => c.id).sort());
          } catch (e) {
            errors.push(e);
            return;
          }
        }
      }),
    );
    // Server-wide, so other work on the server may add to it: for information only.
    console.info(
      `${name}: ${ROWS} rows drained by ${CLAIMERS} claimers in ${Date.now() - started} ms; ` +
        `InnoDB deadlocks meanwhile (retried, never surfaced): ${(await deadlocks()) - deadlocksBefore}`,
    );
    expect(errors).toEqual([]);
    const doubles = [...seen.values()].filter((count) => count > 1).length;
    expect(doubles).toBe(0);
    expect(seen.size).toBe(ROWS);
    const stats = await first.stats(now);
    expect(stats.counts.reduce((sum, c) => sum + (c.status === 'SUCCESS' ? c.count : 0), 0)).toBe(ROWS);
    expect(stats.oldestDueAt).toBeNull();
  }, 120_000);
});
