import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { LIMITS } from '@asynccmd/core';
import { keyedReads } from '@asynccmd/core/store-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flowKeyOf, flowKeySql, postgresKeyedReader } from '../src/flow-keys.js';
import { tableNames } from '../src/names.js';
import type { PostgresCommandStore } from '../src/index.js';
import { adminQuery, command, DATABASE_URL, dropSchema, openStore, uniqueSchema } from './helpers.js';
import { nodes, type PlanNode } from './plans.js';

const BIG = 200_000;
const SMALL_KEYS = 20;
const SMALL_EACH = 10;
const LIMIT = 21;

/**
 * A fair-share claim behind one key's 200,000 due commands: its reads go through flow_idx and read
 * a number of rows bounded by the keys and the claim's size, never the backlog. Rows read are this
 * transaction's own counts (pg_stat_xact_*), taken on a table that was never analyzed.
 */
describe('the keyed claim behind a 200,000-command backlog of one key', () => {
  const schema = uniqueSchema('acpg_keyed');
  const n = tableNames(schema, 'async_command');
  const flow = flowKeySql(n);
  let store: PostgresCommandStore;
  let client: pg.Client;
  /** A claim's now, a little ahead of every command's due time. */
  const now = (): Date => new Date(Date.now() + 1000);

  beforeAll(async () => {
    store = await openStore(schema);
    await store.keyLimits!.declare([{ type: 'fair', keyField: 'tenant', maxRunning: LIMITS.keyLimit }]);
    // The big tenant's backlog first, keyed by the expression the store's inserts write.
    await adminQuery(
      `INSERT INTO ${n.table} (type, payload, max_retry, next_run_at, created_at, updated_at, flow_key)
       SELECT 'fair', p, 0, now() - interval '1 minute', now(), now(), ${flowKeyOf(n, "'fair'", 'p')}
       FROM (SELECT json_build_object('tenant', 'big', 'i', g) AS p FROM generate_series(1, $1::integer) AS g) AS s`,
      [BIG],
    );
    // The small tenants' behind it, through the store's own insert.
    await store.transaction((tx) =>
      store.insert(
        tx,
        Array.from({ length: SMALL_KEYS * SMALL_EACH }, (_, i) =>
          command('fair', { tenant: `t${i % SMALL_KEYS}`, i }),
        ),
      ),
    );
    client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
  }, 120_000);

  afterAll(async () => {
    await client?.end();
    await store?.close();
    await dropSchema(schema);
  });

  /** Rows this transaction has fetched from the command table so far: by its indexes, and by scanning it. */
  async function readSoFar(): Promise<{ fetched: number; scanned: number }> {
    const [row] = (
      await client.query<{ fetched: string; scanned: string }>(
        `SELECT coalesce(idx_tup_fetch, 0) AS fetched, coalesce(seq_tup_read, 0) AS scanned
         FROM pg_stat_xact_user_tables WHERE relid = $1::regclass`,
        [n.table],
      )
    ).rows;
    return { fetched: Number(row?.fetched ?? 0), scanned: Number(row?.scanned ?? 0) };
  }

  it('reads the heads and the rows it may take from flow_idx: hundreds of entries, not 200,000', async () => {
    await client.query('BEGIN');
    try {
      const before = await readSoFar();
      const reader = postgresKeyedReader(
        client as unknown as pg.PoolClient,
        flow,
        'fair',
        now().toISOString(),
      );
      const { heads, running } = await reader.heads(true);
      expect(heads).toHaveLength(1 + SMALL_KEYS);
      const reads = keyedReads(heads, running, LIMITS.keyLimit, LIMIT, Date.now() + 1000);
      const rows = await reader.rows(reads);
      const after = await readSoFar();
      expect(after.scanned - before.scanned).toBe(0);
      // 21 pairs found one probe each; the rows: at most LIMIT of the big key and 10 of each other.
      expect(after.fetched - before.fetched).toBeGreaterThan(0);
      expect(after.fetched - before.fetched).toBeLessThanOrEqual(
        2 * (1 + SMALL_KEYS) + LIMIT + SMALL_KEYS * SMALL_EACH,
      );
      expect(rows.filter((r) => r.key === 'big')).toHaveLength(LIMIT);
    } finally {
      await client.query('ROLLBACK');
    }
  });

  it('plans both reads on flow_idx (the RUNNING count on the lease index), with no sequential scan or sort', async () => {
    const plans = [
      [flow.heads, ['fair', true]],
      [flow.rows, ['fair', ['big', 't1'], [0, 0], [LIMIT, SMALL_EACH], now().toISOString()]],
    ] as const;
    for (const [text, values] of plans) {
      const [explained] = (
        await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (FORMAT JSON) ${text}`, [
          ...values,
        ])
      ).rows;
      const all = nodes(explained!['QUERY PLAN'][0].Plan);
      const scans = all.filter((p) => p['Relation Name'] === 'async_command');
      expect(scans.length).toBeGreaterThan(0);
      const indexes = all.flatMap((p) => (p['Index Name'] === undefined ? [] : [p['Index Name']]));
      // Besides flow_idx: the RUNNING count's lease index, the ordering keys' index (a command with one).
      expect(new Set(indexes)).toEqual(
        new Set([
          'async_command_flow_idx',
          text === flow.heads ? 'async_command_lease_idx' : 'async_command_keyed_idx',
        ]),
      );
      // A sort only for the count of RUNNING commands per key (as many as run, never the backlog).
      expect(all.map((p) => p['Node Type']).join(' ')).not.toMatch(
        text === flow.heads ? /Seq Scan/ : /Seq Scan|Sort/,
      );
    }
  });

  it('a claim of 21 takes one command of each of the 21 keys, the big one’s backlog behind them', async () => {
    const claimed = await store.claimDue({
      types: ['fair'],
      keyedTypes: ['fair'],
      limit: LIMIT,
      now: now(),
      token: randomUUID(),
      leaseMs: 60_000,
    });
    const tenants = claimed.map((c) => (c.payload as { tenant: string }).tenant);
    expect(new Set(tenants).size).toBe(1 + SMALL_KEYS);
  });
});
