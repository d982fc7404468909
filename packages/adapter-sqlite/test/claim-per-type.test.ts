import type { ClaimedCommand } from '@asynccmd/core';
import { afterAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../src/index.js';
import type { SqliteCommandStore } from '../src/index.js';
import { sqliteSql } from '../src/sql.js';

const open: SqliteCommandStore[] = [];
afterAll(async () => {
  for (const s of open) await s.close();
});

async function memoryStore(): Promise<SqliteCommandStore> {
  const store = createSqliteStore({ filename: ':memory:' });
  open.push(store);
  await store.migrate();
  return store;
}

/** `count` commands of `type` due a minute ago, `step` ms apart from `offset`, at `priority`. */
function due(
  store: SqliteCommandStore,
  type: string,
  count: number,
  priority = 5,
  offset = 0,
  step = 0,
): void {
  store.db
    .prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count)
       INSERT INTO async_command (type, payload, status, max_retry, next_run_at, priority, created_at, updated_at)
       SELECT :type, '{}', 'PENDING', 3, :at + i * :step, :priority, 0, 0 FROM n`,
    )
    .run({ type, count, priority, at: Date.now() - 60_000 + offset, step });
}

let tokens = 0;
const claim = (store: SqliteCommandStore, types: string[], limit: number): Promise<ClaimedCommand[]> =>
  store.claimDue({ types, limit, now: new Date(Date.now() + 1), token: `t${tokens++}`, leaseMs: 60_000 });

/** The PENDING due rows of `types` in claim order. */
function claimOrder(store: SqliteCommandStore, types: string[]): string[] {
  return store.db
    .prepare(
      `SELECT CAST(id AS TEXT) FROM async_command
       WHERE status = 'PENDING' AND type IN (SELECT value FROM json_each(?)) AND next_run_at <= ?
       ORDER BY priority, next_run_at, id`,
    )
    .pluck()
    .all(JSON.stringify(types), Date.now()) as string[];
}

describe('claims per type (SQLite)', () => {
  it('the claim of a type and the read of its candidates search the claim index by type, with no sort', async () => {
    const store = await memoryStore();
    const sql = sqliteSql('async_command');
    const params = { token: 't', instance: 'w', leaseMs: 1, now: 1, type: 'a', limit: 1 };
    for (const text of [sql.claimDue, sql.claimCandidates]) {
      const plan = (store.db.prepare(`EXPLAIN QUERY PLAN ${text}`).all(params) as { detail: string }[])
        .map((r) => r.detail)
        .join('; ');
      expect(plan).toMatch(/USING INDEX async_command_claim_type \(type=\?/);
      expect(plan).not.toContain('TEMP B-TREE');
    }
  });

  it('a claim of one type behind 100,000 due commands of another reads only its own rows', async () => {
    const store = await memoryStore();
    due(store, 'big', 100_000, 0);
    due(store, 'small', 3, 9);
    // The claim index has the small type's own range: the claim's search lands in it (plan above).
    const read = store.db.prepare(
      `SELECT count(*) FROM async_command INDEXED BY async_command_claim_type
       WHERE type = 'small' AND status = 'PENDING'`,
    );
    expect(read.pluck().get()).toBe(3);
    const claimed = await claim(store, ['small', 'idle'], 50);
    expect(claimed.map((c) => c.type)).toEqual(['small', 'small', 'small']);
    expect((await claim(store, ['small'], 50)).length).toBe(0);
  });

  it('several types: each claim takes the first rows of all of them in claim order, priorities across types first', async () => {
    const store = await memoryStore();
    // Interleaved due times and priorities across three types, some not due yet.
    store.db
      .prepare(
        `WITH RECURSIVE n(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM n WHERE g < 600)
         INSERT INTO async_command (type, payload, status, max_retry, next_run_at, priority, created_at, updated_at)
         SELECT json_extract('["a","b","c"]', '$[' || ((g * 7) % 3) || ']'), '{}', 'PENDING', 3,
                :at + ((g * 37) % 500) + CASE WHEN g % 11 = 0 THEN 3600000 ELSE 0 END, (g * 13) % 4, 0, 0
         FROM n`,
      )
      .run({ at: Date.now() - 60_000 });
    for (const types of [['a', 'b'], ['a', 'b', 'c'], ['c']]) {
      for (const limit of [1, 7, 40]) {
        const expected = claimOrder(store, types).slice(0, limit);
        const claimed = await claim(store, types, limit);
        expect({ types, limit, ids: claimed.map((c) => c.id) }).toEqual({ types, limit, ids: expected });
      }
    }
  });

  it('within type limits, the other types are claimed per type too', async () => {
    const store = await memoryStore();
    await store.typeLimits!.declare([{ type: 'limited', maxRunning: 2 }]);
    due(store, 'big', 1_000, 0);
    due(store, 'limited', 5, 5);
    due(store, 'a', 3, 5, 10, 1);
    due(store, 'b', 3, 5, 5, 1);
    const claimed = await store.claimDue({
      types: ['limited', 'a', 'b'],
      limitedTypes: ['limited'],
      limit: 10,
      now: new Date(Date.now() + 1),
      token: 'limits',
      leaseMs: 60_000,
    });
    const types = claimed.map((c) => c.type);
    expect(types.filter((t) => t === 'limited')).toHaveLength(2);
    expect(types.filter((t) => t === 'a' || t === 'b')).toHaveLength(6);
    expect(types).not.toContain('big');
  });
});
