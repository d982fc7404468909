import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { tableNames } from '../src/names.js';
import { buildSql } from '../src/sql.js';
import type { PostgresCommandStore } from '../src/index.js';
import { adminQuery, DATABASE_URL, dropSchema, openStore, uniqueSchema } from './helpers.js';
import { nodes, type PlanNode } from './plans.js';

const schema = uniqueSchema('acpg_fenced_plan');
let store: PostgresCommandStore;
afterAll(async () => {
  await store?.close();
  await dropSchema(schema);
});

/**
 * The fenced writes by id (heartbeat, complete, release, fail) read the rows
 * they name by primary key, under a generic plan, on a table whose statistics were taken when no
 * command was RUNNING — as they are after an ANALYZE of an idle queue. A plan that scanned every
 * RUNNING row (or the table) and compared each with every ref grew with the square of the batch:
 * 0.4 s for a 1,000-ref heartbeat, measured on a soak.
 */
describe('the PostgreSQL fenced writes by id', () => {
  it('read the rows they name by primary key, never a scan of the RUNNING rows or of the table', async () => {
    store = await openStore(schema);
    const t = `"${schema}".async_command`;
    await adminQuery(
      `INSERT INTO ${t} (type, payload, max_retry, next_run_at, created_at, updated_at)
       SELECT 'noop', '{}', 3, now() - interval '1 minute', now(), now() FROM generate_series(1, 20000)`,
    );
    await adminQuery(`ANALYZE ${t}`);
    const token = randomUUID();
    const claimed = await store.claimDue({
      types: ['noop'],
      limit: 1_000,
      now: new Date(Date.now() + 1),
      token,
      leaseMs: 60_000,
    });
    expect(claimed).toHaveLength(1_000);
    const ids = `'{${claimed.map((c) => c.id).join(',')}}'`;
    const tokens = `'{${claimed.map(() => token).join(',')}}'`;
    const sql = buildSql(tableNames(schema, 'async_command'));
    const statements: [string, string, string][] = [
      ['heartbeat', sql.heartbeat, `${ids}, ${tokens}, 60000`],
      ['complete', sql.complete, `${ids}, ${tokens}`],
      ['completeSettling', sql.completeSettling, `${ids}, ${tokens}, '{}'`],
      ['release', sql.release, `${ids}, ${tokens}`],
    ];
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    try {
      for (const [name, text, values] of statements) {
        await client.query('BEGIN');
        await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
        await client.query(`PREPARE fenced AS ${text}`);
        const [row] = (
          await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
            `EXPLAIN (FORMAT JSON) EXECUTE fenced(${values})`,
          )
        ).rows;
        await client.query('ROLLBACK');
        await client.query('DEALLOCATE ALL');
        const onTable = nodes(row!['QUERY PLAN'][0].Plan).filter(
          (n) => n['Relation Name'] === 'async_command' && n['Node Type'].includes('Scan'),
        );
        expect(onTable.length, name).toBeGreaterThan(0);
        // By primary key; a schedule's tick (completed in place) also by the index of ticks, which
        // holds recurring schedules' rows only.
        const byKey = (n: PlanNode): boolean =>
          n['Node Type'] === 'Index Scan' &&
          (n['Index Name'] === 'async_command_pkey' || n['Index Name'] === 'async_command_schedule_tick');
        expect(
          onTable.filter((n) => !byKey(n)),
          name,
        ).toEqual([]);
        expect(
          onTable.some((n) => n['Index Name'] === 'async_command_pkey'),
          name,
        ).toBe(true);
      }
    } finally {
      await client.end();
    }
  });
});
