import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ClaimedCommand } from '@asynccmd/core';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import {
  HeadSkip,
  LATE_COMMIT_MS,
  RECLAIM_MARGIN_MS,
  ReclaimWindow,
  type ClaimPosition,
} from '../src/head-skip.js';
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

const claimed = (ids: string[], priority = 5): ClaimedCommand[] =>
  ids.map((id) => ({ id, priority, nextRunAt: new Date(Number(id)) }) as unknown as ClaimedCommand);

describe('claims past a slow head (PostgreSQL)', () => {
  it('a slow claim from the head makes the next ones start at its last row, with one from the head every headEveryMs; a fast one ends it', () => {
    const skip = new HeadSkip({ slowMs: 50, headEveryMs: 1_000 });
    const types = ['noop'];
    expect(skip.startOf(types, 0)).toBeNull();
    // Fast from the head: nothing changes.
    skip.claimed(types, null, 10, claimed(['1', '2']), 10);
    expect(skip.startOf(types, 20)).toBeNull();
    // Slow from the head: the next claims start at its last row.
    skip.claimed(types, null, 80, claimed(['3', '4']), 100);
    // A second of due time before its last row: a command committed a little late is still read.
    const at: ClaimPosition | null = skip.startOf(types, 150);
    expect(at).toEqual({ priority: 5, dueAt: new Date(4 - LATE_COMMIT_MS), id: '0' });
    // A claim from there moves the position on; one that claimed nothing leaves it.
    skip.claimed(types, at, 1, claimed(['9']), 160);
    skip.claimed(types, skip.startOf(types, 170), 1, [], 170);
    expect(skip.startOf(types, 180)?.dueAt).toEqual(new Date(9 - LATE_COMMIT_MS));
    // Other types keep their own.
    expect(skip.startOf(['other'], 180)).toBeNull();
    // The next claim from the head comes headEveryMs after the last, or 20 times its length when
    // that is longer (80 ms: 1,600 ms)...
    expect(skip.startOf(types, 1_100)?.dueAt).toEqual(new Date(9 - LATE_COMMIT_MS));
    expect(skip.startOf(types, 1_700)).toBeNull();
    // ...and if that one is still slow, the skipping goes on from its last row.
    skip.claimed(types, null, 60, claimed(['12']), 1_710);
    expect(skip.startOf(types, 1_720)?.dueAt).toEqual(new Date(12 - LATE_COMMIT_MS));
    expect(skip.startOf(types, 2_900)?.dueAt).toEqual(new Date(12 - LATE_COMMIT_MS));
    // A fast one from the head ends it.
    expect(skip.startOf(types, 2_910)).toBeNull();
    skip.claimed(types, null, 5, claimed(['13']), 2_920);
    expect(skip.startOf(types, 2_930)).toBeNull();
    expect(skip.isSkipping(types)).toBe(false);
  });

  it('the reclaim reads only what lapsed since the scan before while a full scan is slow, and a full scan again at the same spacing', () => {
    const window = new ReclaimWindow({ slowMs: 50, headEveryMs: 1_000 });
    expect(window.windowOf(0)).toBeNull();
    window.scanned(null, 0, 10, 0, 100); // fast: the next is full too
    expect(window.windowOf(1_000)).toBeNull();
    window.scanned(null, 1_000, 200, 3, 100); // slow: windowed for 20 × 200 ms
    expect(window.windowOf(2_000)).toBe(1_000 + RECLAIM_MARGIN_MS);
    window.scanned(1_000 + RECLAIM_MARGIN_MS, 2_000, 5, 100, 100); // hit its limit: the range stays
    expect(window.windowOf(3_000)).toBe(2_000 + RECLAIM_MARGIN_MS);
    window.scanned(2_000 + RECLAIM_MARGIN_MS, 3_000, 5, 4, 100);
    expect(window.windowOf(4_000)).toBe(1_000 + RECLAIM_MARGIN_MS);
    expect(window.windowOf(5_000)).toBeNull(); // 4,000 ms after the slow full scan
    window.scanned(null, 5_000, 20, 0, 100); // fast again: full scans from now on
    expect(window.windowOf(6_000)).toBeNull();
  });

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
      const scan = (plan: PlanNode) => nodes(plan).find((n) => n['Index Name'] === 'async_command_claim_idx');
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
