import { randomUUID } from 'node:crypto';
import { silentLogger, type Logger } from '@asynccmd/core';
import { afterAll, describe, expect, it } from 'vitest';
import type { PostgresCommandStore } from '../src/index.js';
import { StalePlanWatch } from '../src/stale-plans.js';
import { adminQuery, command, dropSchema, openStore, uniqueSchema } from './helpers.js';

const schema = uniqueSchema('acpg_stale_plans');
let store: PostgresCommandStore | undefined;
afterAll(async () => {
  await store?.close();
  await dropSchema(schema);
});

const analyzed = async (): Promise<number> => {
  const [row] = await adminQuery<{ n: string }>(
    `SELECT (analyze_count + autoanalyze_count)::text AS n FROM pg_stat_user_tables
     WHERE schemaname = $1 AND relname = 'async_command'`,
    [schema],
  );
  return Number(row?.n ?? 0);
};

describe('the PostgreSQL store and plans cached while its table was small', () => {
  it('has the table analyzed when a fenced write is slow, and goes on completing', async () => {
    const logged: string[] = [];
    const logger: Logger = { ...silentLogger, info: (_obj, msg) => void logged.push(msg ?? '') };
    // One connection: every statement below runs on the session whose plans it cached.
    store = await openStore(schema, { logger, poolConfig: { max: 1 } });
    const t = `"${schema}".async_command`;
    // Autovacuum's own ANALYZE would rebuild the plans too: kept out of the test (before any
    // plan is cached, as changing the table's options drops them as well).
    await adminQuery(`ALTER TABLE ${t} SET (autovacuum_enabled = false)`);
    // Completions one at a time on a table of a dozen rows: the session caches a generic plan
    // made from that size.
    await store.transaction((tx) =>
      store!.insert(
        tx,
        Array.from({ length: 12 }, () => command('small')),
      ),
    );
    const token = randomUUID();
    const claimed = await store.claimDue({
      types: ['small'],
      limit: 12,
      now: new Date(Date.now() + 1),
      token,
      leaseMs: 60_000,
    });
    expect(claimed).toHaveLength(12);
    for (const c of claimed) expect(await store.complete([{ id: c.id, token }])).toEqual([c.id]);
    const before = await analyzed();
    // The table grows by 300,000 running rows; nothing analyzes it.
    const bigToken = randomUUID();
    const ids = (
      await adminQuery<{ id: string }>(
        `INSERT INTO ${t} (type, payload, max_retry, next_run_at, created_at, updated_at, status, claim_token, lease_until, started_at)
         SELECT 'big', '{}', 3, now(), now(), now(), 'RUNNING', $1, now() + interval '1 hour', now()
         FROM generate_series(1, 300000) RETURNING id::text`,
        [bigToken],
      )
    ).map((r) => r.id);
    const refs = (from: number) => ids.slice(from, from + 200).map((id) => ({ id, token: bigToken }));
    // Completing 200 of them on the cached plan reads the table for them: slow enough to be seen.
    expect(await store.complete(refs(0))).toHaveLength(200);
    for (let waited = 0; (await analyzed()) === before && waited < 20_000; waited += 100) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await analyzed()).toBeGreaterThan(before);
    expect(logged.some((m) => m.includes('analyzing the table'))).toBe(true);
    // The plans are made again from the table's present size; completions go on as ever.
    expect(await store.complete(refs(200))).toHaveLength(200);
    expect(await store.get(ids[399]!)).toMatchObject({ status: 'SUCCESS' });
    expect(await store.get(ids[400]!)).toMatchObject({ status: 'RUNNING' });
  });
});

describe('StalePlanWatch', () => {
  it('analyzes once for a slow write, never for a fast one, and not again within its interval', async () => {
    let now = 0;
    let analyses = 0;
    let finish: () => void = () => undefined;
    const watch = new StalePlanWatch(
      () => {
        analyses += 1;
        return new Promise<void>((resolve) => (finish = resolve));
      },
      { analyzing: () => undefined, failed: () => undefined },
      { slowMs: 50, perRowMs: 0.2, everyMs: 60_000 },
      () => now,
    );
    watch.took(149, 500); // within 50 + 0.2 × 500 ms
    expect(analyses).toBe(0);
    watch.took(151, 500);
    expect(analyses).toBe(1);
    watch.took(10_000, 1); // one already running
    finish();
    await new Promise((resolve) => setImmediate(resolve));
    now = 59_999;
    watch.took(10_000, 1); // within the interval
    expect(analyses).toBe(1);
    now = 60_000;
    watch.took(10_000, 1);
    expect(analyses).toBe(2);
  });
});
