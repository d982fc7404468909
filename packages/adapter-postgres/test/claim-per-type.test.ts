import { randomUUID } from 'node:crypto';
import type { ClaimedCommand } from '@asynccmd/core';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import type { PostgresCommandStore } from '../src/index.js';
import { adminQuery, DATABASE_URL, dropSchema, openStore, uniqueSchema } from './helpers.js';
import { explainEverything, nodes, plansOf, type PlanNode } from './plans.js';

const opened: { schema: string; store: PostgresCommandStore }[] = [];
afterAll(async () => {
  for (const { schema, store } of opened) {
    await store.close();
    await dropSchema(schema);
  }
});

async function open() {
  const schema = uniqueSchema('acpg_pertype');
  const store = await openStore(schema, { slowHeadSkip: false });
  opened.push({ schema, store });
  return { schema, store, table: `"${schema}".async_command` };
}

/** `count` commands of `type` due a minute ago (one microsecond apart), at `priority`. */
async function due(table: string, type: string, count: number, priority = 5): Promise<void> {
  await adminQuery(
    `INSERT INTO ${table} (type, payload, max_retry, next_run_at, priority, created_at, updated_at)
     SELECT $1, '{}', 3, now() - interval '1 minute' + g * interval '1 microsecond', $3, now(), now()
     FROM generate_series(1, $2::integer) AS g`,
    [type, count, priority],
  );
}

const claim = (store: PostgresCommandStore, types: string[], limit: number): Promise<ClaimedCommand[]> =>
  store.claimDue({ types, limit, now: new Date(Date.now() + 1), token: randomUUID(), leaseMs: 60_000 });

/** The plans of the pick function's statements when it claims `types` (rolled back), with buffers. */
async function pickPlans(schema: string, types: string[], limit: number): Promise<PlanNode[]> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const logged = await explainEverything(client, { buffers: true });
    await client.query('BEGIN');
    logged.length = 0;
    await client.query(`SELECT * FROM "${schema}".async_command_claim_due(now(), $1::text[], $2)`, [
      types,
      limit,
    ]);
    await client.query('ROLLBACK');
    // The function's own statements, not the SELECT that called it.
    return plansOf(logged)
      .filter((e) => !e['Query Text'].includes('async_command_claim_due('))
      .map((e) => e.Plan);
  } finally {
    await client.end();
  }
}

/** The pages a plan read (a node's counts hold its children's). */
const blocks = (plan: PlanNode): number =>
  (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0);

/** The PENDING rows of `types` that a claim may take, in claim order: what a claim must take first. */
async function claimOrder(table: string, types: string[]): Promise<string[]> {
  const rows = await adminQuery<{ id: string }>(
    `SELECT c.id::text AS id FROM ${table} AS c
     WHERE c.status = 'PENDING' AND c.type = ANY($1::text[]) AND c.next_run_at <= now()
     ORDER BY c.priority, c.next_run_at, c.id`,
    [types],
  );
  return rows.map((r) => r.id);
}

describe('claims per type (PostgreSQL)', () => {
  it('a claim of one type behind 100,000 due commands of another reads only its own rows', async () => {
    const { schema, store, table } = await open();
    await due(table, 'big', 100_000, 0);
    await due(table, 'small', 3, 9);
    for (const types of [['small'], ['small', 'idle']]) {
      const plans = await pickPlans(schema, types, 50);
      const total = plans.reduce((sum, p) => sum + blocks(p), 0);
      // A handful of index and heap pages; through the big type's entries it was hundreds.
      expect(total).toBeLessThan(30);
      for (const plan of plans) {
        expect(nodes(plan).filter((n) => /Seq Scan|Bitmap/.test(n['Node Type']))).toEqual([]);
      }
    }
    const claimed = await claim(store, ['small'], 50);
    expect(claimed.map((c) => c.type)).toEqual(['small', 'small', 'small']);
  }, 120_000);

  it('two busy types behind a third: the pick reads about the limit of each, never the third', async () => {
    const { schema, table } = await open();
    await due(table, 'big', 100_000, 0);
    await due(table, 'a', 2_000, 5);
    await due(table, 'b', 2_000, 5);
    const plans = await pickPlans(schema, ['a', 'b'], 50);
    const read = plans.flatMap((p) => nodes(p)).filter((n) => n['Node Type'] === 'Index Scan');
    expect(read.length).toBeGreaterThan(0);
    for (const scan of read) {
      expect(scan['Index Name']).toMatch(/claim_type_idx|keyed_idx|pkey/);
    }
    // The probes, the unlocked read of 50 per type and the locking read of 50: no backlog read.
    const rows = read.reduce((sum, n) => sum + (n['Actual Rows'] ?? 0), 0);
    expect(rows).toBeLessThan(400);
  }, 120_000);

  it('several types: each claim takes the first rows of all of them in claim order, priorities across types first', async () => {
    const { store, table } = await open();
    // Interleaved due times and priorities across three types, some not due yet.
    await adminQuery(
      `INSERT INTO ${table} (type, payload, max_retry, next_run_at, priority, created_at, updated_at)
       SELECT (ARRAY['a', 'b', 'c'])[1 + (g * 7) % 3], '{}', 3,
              now() - interval '1 minute' + ((g * 37) % 500) * interval '1 millisecond'
                + CASE WHEN g % 11 = 0 THEN interval '1 hour' ELSE interval '0' END,
              (g * 13) % 4, now(), now()
       FROM generate_series(1, 600) AS g`,
    );
    for (const types of [['a', 'b'], ['a', 'b', 'c'], ['c']]) {
      for (const limit of [1, 7, 40]) {
        const expected = (await claimOrder(table, types)).slice(0, limit);
        const claimed = await claim(store, types, limit);
        expect({ types, limit, ids: claimed.map((c) => c.id) }).toEqual({ types, limit, ids: expected });
      }
    }
  }, 60_000);

  it('8 concurrent claimers of three types take every due row once', async () => {
    const { store, table } = await open();
    for (const type of ['a', 'b', 'c']) await due(table, type, 1_000, 5);
    await due(table, 'a', 500, 1);
    const seen: string[] = [];
    const sizes: number[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, worker) => {
        const types = worker % 2 === 0 ? ['a', 'b', 'c'] : ['c', 'a', 'b'];
        for (;;) {
          const rows = await claim(store, types, 25);
          sizes.push(rows.length);
          seen.push(...rows.map((r) => r.id));
          if (rows.length === 0) return;
        }
      }),
    );
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toHaveLength(3_500);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(25);
    const [left] = await adminQuery<{ n: string }>(
      `SELECT count(*) AS n FROM ${table} WHERE status = 'PENDING'`,
    );
    expect(left!.n).toBe('0');
  }, 120_000);

  it('rows another claim holds are skipped, and the claim reads past them for the rest of its limit', async () => {
    const { store, schema, table } = await open();
    await due(table, 'a', 30, 5);
    await due(table, 'b', 30, 5);
    const holder = new pg.Client({ connectionString: DATABASE_URL });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      // Another claim in flight: the first 20 rows of the claim order, locked.
      const held = await holder.query<{ id: string }>(
        `SELECT id::text AS id FROM "${schema}".async_command_claim_due(now(), '{a,b}', 20) AS id`,
      );
      expect(held.rows).toHaveLength(20);
      const order = await claimOrder(table, ['a', 'b']);
      const claimed = await claim(store, ['a', 'b'], 20);
      // The next 20 in claim order, in one claim.
      expect(claimed.map((c) => c.id)).toEqual(order.slice(20, 40));
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
  }, 60_000);

  it('a claim from a position (past a slow head) with several types starts there', async () => {
    const { schema, table } = await open();
    await due(table, 'a', 10, 5);
    await due(table, 'b', 10, 5);
    const order = await adminQuery<{ id: string; priority: number; at: string }>(
      `SELECT c.id::text AS id, c.priority, c.next_run_at::text AS at FROM ${table} AS c
       ORDER BY c.priority, c.next_run_at, c.id`,
    );
    const position = order[12]!;
    const picked = await adminQuery<{ id: string }>(
      `SELECT id::text AS id FROM "${schema}".async_command_claim_due_from(now(), '{a,b}', 5, $1, $2, $3) AS id`,
      [position.priority, position.at, position.id],
    );
    expect(picked.map((r) => r.id).sort()).toEqual(
      order
        .slice(12, 17)
        .map((r) => r.id)
        .sort(),
    );
  }, 60_000);
});
