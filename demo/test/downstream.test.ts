import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { DEFAULT_PROFILES, SimulatedDownstream, START_PROFILES } from '../src/downstream.js';
import { sqliteSession } from '../src/db/sql.js';
import { migrateOrderSchema } from '../src/domain/schema.js';

/** Which of the ERP syncs of orders 1..n `profile` refuses, each tried `tries` times. */
async function refusedSyncs(profile: typeof START_PROFILES.external, n: number, tries: number) {
  const db = new Database(':memory:');
  const session = sqliteSession(db);
  await migrateOrderSchema(session);
  const erp = new SimulatedDownstream(
    'external',
    { ...profile, latencyMs: 0, failureRate: 0, slowRate: 0 },
    45,
    session,
  );
  const refused = new Set<string>();
  for (let order = 1; order <= n; order++) {
    for (let t = 0; t < tries; t++) {
      const key = `sync:${order}:v2`;
      await erp.call(key).catch(() => refused.add(`${key}#${t}`));
    }
  }
  db.close();
  return refused;
}

describe('the ERP of npm start', () => {
  it('refuses a few orders for good (every try), so the built-in load leaves dead letters', async () => {
    const refused = await refusedSyncs(START_PROFILES.external, 300, 4);
    const orders = new Set([...refused].map((k) => k.split('#')[0]));
    expect(orders.size).toBeGreaterThanOrEqual(1);
    expect(orders.size).toBeLessThan(15);
    // Refused on every try: retries never fix it.
    expect(refused.size).toBe(orders.size * 4);
  });

  it('refuses nothing in the experiment’s profile', async () => {
    expect((await refusedSyncs(DEFAULT_PROFILES.external, 300, 1)).size).toBe(0);
  });
});
