import { afterAll, describe, expect, it } from 'vitest';
import { tableNames } from '../src/names.js';
import { typeLimitSql } from '../src/type-limits.js';
import type { PostgresCommandStore } from '../src/index.js';
import { adminQuery, dropSchema, openStore, uniqueSchema } from './helpers.js';

const opened: { schema: string; store: PostgresCommandStore }[] = [];
afterAll(async () => {
  for (const { schema, store } of opened) {
    await store.close();
    await dropSchema(schema);
  }
});

describe('the count of a limited claim', () => {
  it('reads the RUNNING rows from the partial lease index, never the type’s history, on a table never analyzed', async () => {
    const schema = uniqueSchema('acpg_lim');
    opened.push({ schema, store: await openStore(schema) });
    const n = tableNames(schema, 'async_command');
    await adminQuery(
      `INSERT INTO ${n.table} (type, payload, status, max_retry, next_run_at, created_at, updated_at, finished_at)
       SELECT 'report.render', '{}', 'SUCCESS', 3, now(), now(), now(), now() FROM generate_series(1, 100000)`,
    );
    await adminQuery(
      `INSERT INTO ${n.table} (type, payload, status, max_retry, next_run_at, created_at, updated_at, started_at, lease_until)
       SELECT 'report.render', '{}', 'RUNNING', 3, now(), now(), now(), now(), now() + interval '1 hour'
       FROM generate_series(1, 3)`,
    );
    const sql = typeLimitSql(n, n.table);
    const plan = await adminQuery<{ 'QUERY PLAN': string }>(
      `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ${sql.running.replace('$1', `'report.render'`)}`,
    );
    const text = plan.map((r) => r['QUERY PLAN']).join('\n');
    expect(text).toContain('async_command_lease_idx');
    expect(text).not.toContain('type_biz_idx');
    expect(text).not.toMatch(/Seq Scan/);
    const [counted] = await adminQuery<{ running: number }>(sql.running, ['report.render']);
    expect(counted?.running).toBe(3);
  });
});
