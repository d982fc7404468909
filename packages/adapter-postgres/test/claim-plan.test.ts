import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { tableNames } from '../src/names.js';
import { buildSql } from '../src/sql.js';
import type { PostgresCommandStore } from '../src/index.js';
import { adminQuery, DATABASE_URL, dropSchema, openStore, uniqueSchema } from './helpers.js';
import { explainEverything, nodes, plansOf, type PlanNode } from './plans.js';

const FORBIDDEN = /Sort|Bitmap|Seq Scan/;

const opened: { schema: string; store: PostgresCommandStore }[] = [];
afterAll(async () => {
  for (const { schema, store } of opened) {
    await store.close();
    await dropSchema(schema);
  }
});

/**
 * A migrated table that has never been analyzed, with `pending` due rows (priorities 0 to 9, spread
 * over the due times) and `finished` SUCCESS rows.
 */
async function neverAnalyzed(pending: number, finished: number): Promise<string> {
  const schema = uniqueSchema('acpg_plan');
  opened.push({ schema, store: await openStore(schema) });
  const t = `"${schema}".async_command`;
  await adminQuery(
    `INSERT INTO ${t} (type, payload, status, max_retry, next_run_at, created_at, updated_at, finished_at)
     SELECT 'noop', '{}', 'SUCCESS', 3, now() - interval '2 minutes', now(), now(), now()
     FROM generate_series(1, $1::integer)`,
    [finished],
  );
  await adminQuery(
    `INSERT INTO ${t} (type, payload, max_retry, next_run_at, priority, created_at, updated_at)
     SELECT 'noop', '{}', 3, now() - interval '1 minute' + g * interval '1 microsecond', g % 10, now(), now()
     FROM generate_series(1, $1::integer) AS g`,
    [pending],
  );
  const [stats] = await adminQuery<{ reltuples: number; analyzed: boolean }>(
    `SELECT c.reltuples, (s.last_analyze IS NOT NULL OR s.last_autoanalyze IS NOT NULL) AS analyzed
     FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = $1::regclass`,
    [t],
  );
  expect(stats).toEqual({ reltuples: -1, analyzed: false });
  return schema;
}

/**
 * The plans of the store's own claim statement, prepared as the store runs it, under a custom and
 * a generic plan: the outer UPDATE's and the one of the due-id pick inside it (auto_explain, which
 * logs nested statements to this client). Rolled back, so the rows stay pending.
 */
async function claimPlans(schema: string, limit: number): Promise<{ outer: PlanNode; pick: PlanNode }[]> {
  const sql = buildSql(tableNames(schema, 'async_command'));
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const logged = await explainEverything(client);
    await client.query(`PREPARE claim(timestamptz, text[], integer, text, float8, text) AS ${sql.claimDue}`);
    const plans: { outer: PlanNode; pick: PlanNode }[] = [];
    for (const mode of ['force_custom_plan', 'force_generic_plan']) {
      await client.query('BEGIN');
      await client.query(`SET LOCAL plan_cache_mode = ${mode}`);
      logged.length = 0;
      // EXECUTE takes no bound values: the limit is a number and the token a UUID, both safe to splice.
      await client.query(`EXECUTE claim(now(), '{noop}', ${limit}, '${randomUUID()}', 30000, 'plan-test')`);
      await client.query('ROLLBACK');
      const explained = plansOf(logged);
      const isPick = (e: { 'Query Text': string }): boolean => e['Query Text'].includes('LIMIT max_rows');
      const pick = explained.find(isPick);
      const outer = explained.find((e) => !isPick(e));
      expect(pick && outer).toBeTruthy();
      plans.push({ outer: outer!.Plan, pick: pick!.Plan });
    }
    return plans;
  } finally {
    await client.end();
  }
}

function expectIndexScanThatStops(
  plans: readonly { outer: PlanNode; pick: PlanNode }[],
  limit: number,
): void {
  for (const { outer, pick } of plans) {
    expect(pick['Node Type']).toBe('Limit');
    // The ordering-key check is a subplan on keyed_idx, run for keyed rows only (these have none).
    const keyCheck = (n: PlanNode): boolean => n['Index Name'] === 'async_command_keyed_idx';
    const scans = nodes(pick).filter((n) => n['Node Type'].includes('Scan') && !keyCheck(n));
    expect(scans.map((n) => [n['Node Type'], n['Index Name']])).toEqual([
      ['Index Scan', 'async_command_claim_type_idx'],
    ]);
    expect(
      nodes(pick)
        .filter(keyCheck)
        .every((n) => (n['Actual Rows'] ?? 0) === 0),
    ).toBe(true);
    // Stopped after LIMIT rows: it never read the rest of the pending rows.
    expect(scans[0]!['Actual Rows']).toBeLessThanOrEqual(limit);
    expect(nodes(pick).filter((n) => FORBIDDEN.test(n['Node Type']))).toEqual([]);
    // The UPDATE fetches the picked rows by primary key.
    expect(nodes(outer).filter((n) => FORBIDDEN.test(n['Node Type']))).toEqual([]);
    expect(nodes(outer).some((n) => n['Index Name'] === 'async_command_pkey')).toBe(true);
  }
}

describe('the PostgreSQL claim on a table that was never analyzed', () => {
  it('reads the claim index in order and stops after LIMIT rows, with 1,000,000 pending', async () => {
    const schema = await neverAnalyzed(1_000_000, 0);
    expectIndexScanThatStops(await claimPlans(schema, 50), 50);
    // And the store's claim takes the first due rows.
    const { store } = opened.find((o) => o.schema === schema)!;
    const rows = await store.claimDue({
      types: ['noop'],
      limit: 50,
      now: new Date(Date.now() + 1),
      token: randomUUID(),
      leaseMs: 30_000,
    });
    const [first] = await adminQuery<{ ids: string[] }>(
      `SELECT array_agg(id::text ORDER BY priority, next_run_at, id) AS ids
       FROM (SELECT id, next_run_at, priority FROM "${schema}".async_command WHERE status = 'RUNNING') AS r`,
    );
    expect(rows.map((r) => r.id)).toEqual(first!.ids);
    expect(rows).toHaveLength(50);
    // The most urgent priority first: 100,000 pending rows have priority 0.
    expect(new Set(rows.map((r) => r.priority))).toEqual(new Set([0]));
  }, 240_000);

  it('does the same with 1,000,000 finished rows and a few pending', async () => {
    const schema = await neverAnalyzed(1_000, 1_000_000);
    expectIndexScanThatStops(await claimPlans(schema, 50), 50);
  }, 240_000);

  it('reads no WAITING row: with 1,000,000 commands waiting for others, the claim reads only the due ones', async () => {
    const schema = await neverAnalyzed(10, 0);
    await adminQuery(
      `INSERT INTO "${schema}".async_command (type, payload, status, waiting_for, max_retry, next_run_at, created_at, updated_at)
       SELECT 'noop', '{}', 'WAITING', 1, 3, now() - interval '2 minutes', now(), now()
       FROM generate_series(1, $1::integer)`,
      [1_000_000],
    );
    // LIMIT 50 and only 10 due: the index scan reads those 10 and ends, never a waiting row.
    expectIndexScanThatStops(await claimPlans(schema, 50), 10);
  }, 240_000);
});
