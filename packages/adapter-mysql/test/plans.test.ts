import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConnection } from 'mysql2/promise';
import type { Connection } from 'mysql2/promise';
import { mysqlSql } from '../src/sql.js';
import type { MysqlCommandStore } from '../src/store.js';
import { freshDatabase, openStore } from './databases.js';

interface PlanRow {
  table: string | null;
  type: string | null;
  key: string | null;
  Extra: string | null;
}

const FINISHED = 20_000;
const sql = mysqlSql('async_command');

/**
 * The hot statements use their indexes, so finished history does not slow the claim down: checked
 * on the query plans (speed itself is the benchmark's business, never a timed assertion here).
 */
describe('query plans with finished history in the table', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let store: MysqlCommandStore;
  let conn: Connection;
  const now = new Date(Date.now() + 60_000).toISOString().slice(0, 23).replace('T', ' ');

  beforeAll(async () => {
    db = await freshDatabase('asynccmd_mysql_plans');
    store = await openStore(db.url);
    conn = await createConnection(db.url);
    for (let i = 0; i < FINISHED / 2000; i++) {
      await store.insert(
        conn,
        Array.from({ length: 2000 }, (_, n) => ({
          type: 'old',
          payloadJson: '{}',
          maxRetry: 0,
          bizKey: `b${n}`,
        })),
      );
    }
    await conn.query(
      "UPDATE async_command SET status = 'SUCCESS', finished_at = UTC_TIMESTAMP(3), claim_token = 'done'",
    );
    await store.insert(
      conn,
      Array.from({ length: 300 }, () => ({ type: 'work', payloadJson: '{}', maxRetry: 0 })),
    );
    await conn.query('ANALYZE TABLE async_command');
  }, 60_000);
  afterAll(async () => {
    await conn?.end();
    await store?.close();
    await db?.drop();
  });

  async function plan(statement: string, values: unknown[]): Promise<PlanRow[]> {
    const [rows] = await conn.query({ sql: `EXPLAIN ${statement}`, values });
    return rows as PlanRow[];
  }

  it('step 1 (SKIP LOCKED) walks idx_due in order: no full scan, no sort', async () => {
    const [p] = await plan(sql.lockDue, [now, ['work'], 10]);
    expect(p?.key).toBe('idx_due');
    expect(p?.type).toBe('range');
    expect(p?.Extra ?? '').not.toMatch(/filesort/);
  });

  it('step 1 (legacy) reaches its rows through indexes on both levels', async () => {
    const rows = await plan(sql.markDueLegacy, ['t', 1000, now, ['work'], now, ['work'], 10]);
    for (const p of rows.filter((r) => r.table === 'async_command')) {
      expect(p.type).not.toBe('ALL');
      expect(p.key).not.toBeNull();
    }
    const inner = rows.find((r) => r.table === 'async_command' && r.key === 'idx_due');
    expect(inner?.Extra ?? '').not.toMatch(/filesort/);
  });

  it('step 2 reads a round back by its token', async () => {
    const [p] = await plan(sql.claimedBy, ['some-token']);
    expect(p?.key ?? '').toMatch(/^idx_claim_token\b/);
  });

  it('outcome writes find their rows by primary key, even with no RUNNING row to tempt a status index', async () => {
    const refs = ['1', 't', '2', 't'];
    for (const [statement, values] of [
      [sql.complete(2), ['marker', ...refs]],
      [sql.heartbeat(2), [1000, ...refs]],
      [sql.heldRefs(2), refs],
      [sql.lockHeld(2), refs],
      [sql.release, [['1', '2']]],
      [sql.markClaimed, ['t', 1000, ['1', '2']]],
      [sql.reclaim, [5, 5, 5, 'dead', 5, ['1', '2']]],
    ] as const) {
      const [p] = await plan(statement, [...values]);
      expect(p?.key, statement).toBe('PRIMARY');
      expect(p?.type, statement).toBe('range');
    }
  });

  it('the idempotency holder is one unique-index lookup', async () => {
    const [p] = await plan(sql.activeHolder.replace(' LOCK IN SHARE MODE', ''), ['old', 'b1']);
    expect(['uq_active_key', null]).toContain(p?.key); // null: "Impossible WHERE noticed after reading const tables"
    expect(p?.type).not.toBe('ALL');
  });

  it('a purge batch walks (status, finished_at) without sorting every match', async () => {
    const [p] = await plan(sql.purge, ['SUCCESS', now, 100]);
    expect(p?.key).toBe('idx_finished');
    expect(p?.Extra ?? '').not.toMatch(/filesort/);
  });
});
