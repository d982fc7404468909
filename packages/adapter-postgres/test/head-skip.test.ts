import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
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

async function open(options: Parameters<typeof openStore>[1] = {}) {
  const schema = uniqueSchema('acpg_headskip');
  const store = await openStore(schema, options);
  opened.push({ schema, store });
  return { schema, store, table: `"${schema}".async_command` };
}

/** `count` due rows of type noop at `priority`, due a minute ago in id order. */
async function pending(table: string, count: number, priority: number): Promise<void> {
  await adminQuery(
    `INSERT INTO ${table} (type, payload, max_retry, next_run_at, priority, created_at, updated_at)
     SELECT 'noop', '{}', 3, now() - interval '1 minute' + g * interval '1 millisecond', $2, now(), now()
     FROM generate_series(1, $1::integer) AS g`,
    [count, priority],
  );
}

const claim = (store: PostgresCommandStore, limit: number) =>
  store.claimDue({
    types: ['noop'],
    limit,
    now: new Date(Date.now() + 1),
    token: randomUUID(),
    leaseMs: 60_000,
  });

describe('claims past a slow head (PostgreSQL)', () => {
  it('with a snapshot held elsewhere, the pick from a position reads past the dead head instead of through it', async () => {
    const { schema, store, table } = await open({ slowHeadSkip: false });
    await pending(table, 10_000, 5);
    const holder = new pg.Client({ connectionString: DATABASE_URL });
    await holder.connect();
    try {
      // The analytics query: a snapshot older than every claim below, so none of their dead index
      // entries can be removed or marked dead.
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query('SELECT 1');
      let last: ClaimedCommand | undefined;
      for (let i = 0; i < 19; i++) last = (await claim(store, 500)).at(-1);
      const position = [last!.priority, last!.nextRunAt.toISOString(), last!.id];
      const head = await pickPlan(schema, 'claim_due', []);
      const from = await pickPlan(schema, 'claim_due_from', position);
      const blocks = (plan: PlanNode) => (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0);
      const scan = (plan: PlanNode) =>
        nodes(plan).find((n) => n['Index Name'] === 'async_command_claim_type_idx');
      // Both read the claim index in order; the one from a position has it as a start key.
      expect(scan(head)?.['Node Type']).toBe('Index Scan');
      expect(scan(from)?.['Node Type']).toBe('Index Scan');
      expect(scan(from)?.['Index Cond']).toMatch(/ROW\(priority, next_run_at, id\) >= ROW\(/);
      // One row each. From the head, every entry the 9,500 claims left is read, and the heap pages
      // they point to; from the position, a few pages.
      expect(blocks(head)).toBeGreaterThan(20 * blocks(from));
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
  }, 120_000);

  it('skipping: a more urgent command committed behind the position waits for the next claim from the head; nothing is claimed twice or left', async () => {
    const headEveryMs = 5_000;
    // slowMs 0: every claim from the head counts as slow, so the skipping never ends.
    const { store, table } = await open({ slowHeadSkip: { slowMs: 0, headEveryMs } });
    await pending(table, 1_000, 5);
    const ids: string[] = [];
    const first = await claim(store, 100); // from the head: the next start at its last row
    const headAt = Date.now();
    ids.push(...first.map((c) => c.id));
    await pending(table, 1, 0); // more urgent, and behind the position
    const [urgent] = await adminQuery<{ id: string }>(`SELECT id::text FROM ${table} WHERE priority = 0`);
    const next = await claim(store, 100);
    if (Date.now() - headAt < headEveryMs) {
      expect(next.map((c) => c.priority)).toEqual(Array(100).fill(5));
      expect(Number(next[0]!.id)).toBeGreaterThan(Number(first.at(-1)!.id));
    }
    ids.push(...next.map((c) => c.id));
    await sleep(headEveryMs + 50 - (Date.now() - headAt));
    const again = await claim(store, 100); // from the head again: the urgent one first
    expect(again[0]!.id).toBe(urgent!.id);
    ids.push(...again.map((c) => c.id));
    for (let round = 0; round < 20; round++) ids.push(...(await claim(store, 100)).map((c) => c.id));
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toHaveLength(1_001);
    const [left] = await adminQuery<{ n: string }>(
      `SELECT count(*) AS n FROM ${table} WHERE status = 'PENDING'`,
    );
    expect(left!.n).toBe('0');
  }, 60_000);

  it('reclaiming while windowed: a lease lapsed lately is reclaimed, one lapsed before the window waits for the next full scan', async () => {
    // slowMs 0: every full scan counts as slow; headEveryMs an hour: no second full scan here.
    const { store, table } = await open({ slowHeadSkip: { slowMs: 0, headEveryMs: 3_600_000 } });
    const reclaim = () => store.reclaimHung({ limit: 100, maxRescues: 5 });
    const lapsed = async (ago: string): Promise<string> => {
      const [row] = await adminQuery<{ id: string }>(
        `INSERT INTO ${table} (type, payload, status, max_retry, next_run_at, claim_token, lease_until, started_at, created_at, updated_at)
         VALUES ('noop', '{}', 'RUNNING', 3, now(), 'gone', now() - $1::interval, now(), now(), now())
         RETURNING id::text`,
        [ago],
      );
      return row!.id;
    };
    const first = await lapsed('2 hours');
    expect((await reclaim()).map((r) => r.id)).toEqual([first]); // full: every lapsed lease
    const old = await lapsed('1 hour');
    const lately = await lapsed('100 milliseconds');
    expect((await reclaim()).map((r) => r.id)).toEqual([lately]); // windowed
    const [still] = await adminQuery<{ status: string }>(`SELECT status FROM ${table} WHERE id = $1`, [old]);
    expect(still!.status).toBe('RUNNING');
  });
});

/**
 * The plan (with buffers) of the pick inside `fn` for one row, run as the store's claim runs it and rolled
 * back: auto_explain logs the function's nested statement to this client.
 */
async function pickPlan(schema: string, fn: string, position: unknown[]): Promise<PlanNode> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const logged = await explainEverything(client, { buffers: true });
    await client.query('BEGIN');
    const extra = position.length === 0 ? '' : ', $2::smallint, $3::timestamptz, $4::bigint';
    await client.query(`SELECT * FROM "${schema}".async_command_${fn}(now(), '{noop}', $1${extra})`, [
      1,
      ...position,
    ]);
    await client.query('ROLLBACK');
    const pick = plansOf(logged).find((e) => e['Query Text'].includes('LIMIT max_rows'));
    expect(pick).toBeTruthy();
    return pick!.Plan;
  } finally {
    await client.end();
  }
}
