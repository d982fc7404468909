import { randomUUID } from 'node:crypto';
import { LIMITS } from '@asynccmd/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../src/index.js';
import type { SqliteCommandStore } from '../src/index.js';
import { sqliteSql } from '../src/sql.js';

const BIG = 200_000;
const SMALL_KEYS = 20;
const SMALL_EACH = 10;
const LIMIT = 21;

/**
 * A fair-share claim behind one key's 200,000 due commands: each of its reads is a search of the
 * flow index bounded by a key (and priority, and due time) with a LIMIT, so it reads a number of
 * rows bounded by the keys and the claim's size, never the backlog.
 */
describe('the SQLite keyed claim behind a 200,000-command backlog of one key', () => {
  let store: SqliteCommandStore;
  const sql = sqliteSql('async_command');

  beforeAll(async () => {
    store = createSqliteStore({ filename: ':memory:' });
    await store.migrate();
    await store.keyLimits!.declare([{ type: 'fair', keyField: 'tenant', maxRunning: LIMITS.keyLimit }]);
    // Through the insert trigger, as any submit: the big tenant first, then the small ones.
    store.db
      .prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
         INSERT INTO async_command (type, payload, status, max_retry, next_run_at, created_at, updated_at)
         SELECT 'fair', json_object('tenant', 'big', 'i', i), 'PENDING', 0, 0, 0, 0 FROM n`,
      )
      .run(BIG);
    await store.transaction((tx) =>
      store.insert(
        tx,
        Array.from({ length: SMALL_KEYS * SMALL_EACH }, (_, i) => ({
          type: 'fair',
          payloadJson: JSON.stringify({ tenant: `t${i % SMALL_KEYS}`, i }),
          maxRetry: 0,
        })),
      ),
    );
  }, 120_000);

  afterAll(async () => {
    await store?.close();
  });

  const planOf = (statement: string, params: Record<string, unknown>): string[] =>
    (store.db.prepare(`EXPLAIN QUERY PLAN ${statement}`).all(params) as { detail: string }[]).map(
      (r) => r.detail,
    );

  it('keyed every command as it was written', () => {
    const keys = store.db
      .prepare(`SELECT flow_key AS k, count(*) AS n FROM async_command GROUP BY flow_key ORDER BY n DESC`)
      .all() as { k: string; n: number }[];
    expect(keys[0]).toEqual({ k: 'big', n: BIG });
    expect(keys).toHaveLength(1 + SMALL_KEYS);
  });

  it('finds the heads with one search of the flow index per (key, priority), and reads rows by range', () => {
    const heads = planOf(sql.flowHeads, { type: 'fair' });
    const searches = heads.filter((d) => /async_command/.test(d) && !/PRIMARY KEY|INTEGER PRIMARY/.test(d));
    expect(searches.length).toBeGreaterThan(0);
    for (const d of searches)
      expect(d).toMatch(/^SEARCH \w+ USING (COVERING )?INDEX async_command_flow \(type=\?/);
    // Each step: the key's next priority, else the next key — two ranges of the index.
    expect(searches).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/\(type=\? AND flow_key=\? AND priority>\?\)$/),
        expect.stringMatching(/\(type=\? AND flow_key>\?\)$/),
      ]),
    );
    expect(heads.join('; ')).not.toMatch(/^SCAN async_command|TEMP B-TREE/m);
    const rows = planOf(sql.flowRows, {
      type: 'fair',
      key: 'big',
      priority: 0,
      now: Date.now(),
      rows: LIMIT,
    });
    expect(rows[0]).toMatch(
      /^SEARCH due USING INDEX async_command_flow \(type=\? AND flow_key=\? AND priority=\? AND next_run_at<\?\)/,
    );
    expect(rows.join('; ')).not.toMatch(/TEMP B-TREE/);
  });

  it('writes the commands it picked by their ids, not along the claim index to the last of them', () => {
    const write = planOf(sql.claimDuePicked, {
      ids: '[1, 200001]',
      now: Date.now(),
      token: 't',
      instance: 'i',
      leaseMs: 1,
    });
    expect(write[0]).toMatch(/^SEARCH async_command USING INTEGER PRIMARY KEY \(rowid=\?\)$/);
    expect(write.join('; ')).not.toMatch(/async_command_(claim|status|due)/);
  });

  it('a claim of 21 takes one command of each of the 21 keys, the big one’s backlog behind them', async () => {
    const claimed = await store.claimDue({
      types: ['fair'],
      keyedTypes: ['fair'],
      limit: LIMIT,
      now: new Date(Date.now() + 1000),
      token: randomUUID(),
      leaseMs: 60_000,
    });
    const tenants = claimed.map((c) => (c.payload as { tenant: string }).tenant);
    expect(new Set(tenants).size).toBe(1 + SMALL_KEYS);
  });
});
