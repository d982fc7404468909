import { randomUUID } from 'node:crypto';
import { createConnection } from 'mysql2/promise';
import type { Connection, PoolConnection } from 'mysql2/promise';
import { LIMITS } from '@asynccmd/core';
import { keyedReads } from '@asynccmd/core/store-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flowKeySql, mysqlKeyedReader } from '../src/flow-keys.js';
import { toUtcText } from '../src/rows.js';
import type { MysqlCommandStore } from '../src/store.js';
import { freshDatabase, openStore, perProcess } from './databases.js';

const BIG = 200_000;
const SMALL_KEYS = 20;
const SMALL_EACH = 10;
const LIMIT = 21;

interface PlanRow {
  table: string | null;
  type: string | null;
  key: string | null;
  Extra: string | null;
}

/**
 * A fair-share claim behind one key's 200,000 due commands: its reads walk idx_flow, one entry
 * per (key, priority) for the heads and the rows it may take after, never the backlog. Rows read
 * are InnoDB handler reads of this file's own session (SHOW SESSION STATUS).
 */
describe('the keyed claim behind a 200,000-command backlog of one key', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let store: MysqlCommandStore;
  let conn: Connection;
  const flow = flowKeySql('async_command');
  /** A claim's now, a little ahead of every command's due time. */
  const now = (): Date => new Date(Date.now() + 1000);

  beforeAll(async () => {
    db = await freshDatabase(perProcess('asynccmd_mysql_keyed_plan'));
    store = await openStore(db.url);
    conn = await createConnection({
      uri: db.url,
      supportBigNumbers: true,
      bigNumberStrings: true,
      dateStrings: true,
    });
    await store.keyLimits!.declare([{ type: 'fair', keyField: 'tenant', maxRunning: LIMITS.keyLimit }]);
    // The big tenant's backlog first (keyed as the store's inserts key it), 10^5 rows twice.
    await conn.query('CREATE TEMPORARY TABLE digits (d INT)');
    await conn.query('INSERT INTO digits VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9)');
    for (let half = 0; half < BIG / 100_000; half++) {
      await conn.query(
        `INSERT INTO async_command (type, payload, max_retry, next_run_at, headers, created_at, updated_at, flow_key)
         SELECT 'fair', '{"tenant":"big"}', 0, UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE, '{}', UTC_TIMESTAMP(3),
                UTC_TIMESTAMP(3), 'big'
         FROM digits AS a, digits AS b, digits AS c, digits AS d, digits AS e`,
      );
    }
    await store.insert(
      conn,
      Array.from({ length: SMALL_KEYS * SMALL_EACH }, (_, i) => ({
        type: 'fair',
        payloadJson: JSON.stringify({ tenant: `t${i % SMALL_KEYS}`, i }),
        maxRetry: 0,
      })),
    );
  }, 240_000);

  afterAll(async () => {
    await conn?.end();
    await store?.close();
    await db?.drop();
  });

  async function handlerReads(): Promise<number> {
    const [rows] = await conn.query("SHOW SESSION STATUS LIKE 'Handler_read%'");
    return (rows as { Value: string }[]).reduce((sum, r) => sum + Number(r.Value), 0);
  }

  it('reads the heads and the rows it may take from idx_flow: hundreds of entries, not 200,000', async () => {
    await conn.query('START TRANSACTION');
    try {
      const before = await handlerReads();
      const at = now();
      const reader = mysqlKeyedReader(conn as unknown as PoolConnection, flow, 'fair', toUtcText(at));
      const { heads, running } = await reader.heads(true);
      expect(heads).toHaveLength(1 + SMALL_KEYS);
      const rows = await reader.rows(keyedReads(heads, running, LIMITS.keyLimit, LIMIT, at.getTime()));
      const read = (await handlerReads()) - before;
      expect(rows.filter((r) => r.key === 'big')).toHaveLength(LIMIT);
      // A few reads per (key, priority) for the loose scan, and the rows: LIMIT of the big key and
      // 10 of each other, each with its probe (one SHOW STATUS reads a few too).
      expect(read).toBeLessThanOrEqual(4 * (1 + SMALL_KEYS) + 2 * (LIMIT + SMALL_KEYS * SMALL_EACH) + 100);
    } finally {
      await conn.query('ROLLBACK');
    }
  });

  it('plans the heads as a loose scan of idx_flow and each range of rows on idx_flow', async () => {
    const [heads] = await conn.query({ sql: `EXPLAIN ${flow.heads}`, values: ['fair', 'fair', 'fair'] });
    const steps = (heads as PlanRow[]).filter((r) => r.table === 'async_command' || r.table === 'h');
    expect(steps.map((r) => r.key)).toEqual(['idx_flow', 'idx_flow']);
    expect(steps.some((r) => /Using index for group-by/.test(r.Extra ?? ''))).toBe(true);
    expect(steps.find((r) => r.table === 'h')?.type).toBe('ref');
    const at = toUtcText(now());
    const [rows] = await conn.query({
      sql: `EXPLAIN ${flow.rows(2)}`,
      values: ['fair', 'big', 0, at, LIMIT, 'fair', 't1', 0, at, SMALL_EACH],
    });
    const scans = (rows as PlanRow[]).filter((r) => r.table === 'async_command');
    expect(scans.length).toBeGreaterThanOrEqual(2);
    for (const s of scans) {
      expect(s.key, JSON.stringify(s)).toBe('idx_flow');
      expect(s.type, JSON.stringify(s)).toMatch(/^(ref|range)$/);
      expect(s.Extra ?? '', JSON.stringify(s)).not.toMatch(/filesort/);
    }
  });

  it('reads one row of each key from the heads in one statement: each head by its primary key, then idx_flow', async () => {
    const at = toUtcText(now());
    const reader = mysqlKeyedReader(conn as unknown as PoolConnection, flow, 'fair', at);
    const { heads } = await reader.heads(false);
    const first = await reader.rows(heads.map((h) => ({ key: h.key, priority: h.priority, rows: 1 })));
    expect(first.map((c) => c.id).sort()).toEqual(heads.map((h) => h.id).sort());
    const [plan] = await conn.query({
      sql: `EXPLAIN ${flow.firstAfterHeads}`,
      values: [at, JSON.stringify(heads.map((h) => Number(h.id)))],
    });
    const steps = plan as PlanRow[];
    expect(steps.find((r) => r.table === 'head')?.key).toBe('PRIMARY');
    const range = steps.find((r) => r.table === 'h');
    expect(range?.key, JSON.stringify(range)).toBe('idx_flow');
    expect(range?.type, JSON.stringify(range)).toBe('ref');
    expect(range?.Extra ?? '', JSON.stringify(range)).not.toMatch(/filesort/);
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
