import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConnection } from 'mysql2/promise';
import type { Connection } from 'mysql2/promise';
import { mysqlSql } from '../src/sql.js';
import type { MysqlCommandStore } from '../src/store.js';
import { DIGITS, freshDatabase, handlerReads as readsSoFar, openStore, perProcess } from './databases.js';

const sql = mysqlSql('async_command');

/**
 * The claim index is led by type (idx_claim_type: status, type, claim order): a claim of one type
 * reads only that type's rows, and the first read of a claim of several reads each type's own
 * range. Checked on the plans and on the rows the statements really read (InnoDB handler reads),
 * behind 100,000 due commands of another type.
 */
describe('claims per type behind another type’s 100,000 due commands', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let store: MysqlCommandStore;
  let conn: Connection;
  const now = new Date(Date.now() + 60_000).toISOString().slice(0, 23).replace('T', ' ');

  beforeAll(async () => {
    db = await freshDatabase(perProcess('asynccmd_mysql_pertype'));
    store = await openStore(db.url);
    conn = await createConnection({ uri: db.url, supportBigNumbers: true, bigNumberStrings: true });
    // Five cross-joined digits: 100,000 rows of the big type, due first, in one statement.
    await conn.query(
      `INSERT INTO async_command (type, payload, status, max_retry, next_run_at, headers, created_at, updated_at)
       SELECT 'big', '{}', 'PENDING', 0, UTC_TIMESTAMP(3) - INTERVAL 2 MINUTE, '{}', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3)
       FROM (${DIGITS}) a, (${DIGITS}) b, (${DIGITS}) c, (${DIGITS}) d, (${DIGITS}) e`,
    );
    for (const type of ['small', 'other']) {
      await store.insert(
        conn,
        Array.from({ length: 30 }, () => ({ type, payloadJson: '{}', maxRetry: 0 })),
      );
    }
    await conn.query('ANALYZE TABLE async_command');
  }, 600_000);

  afterAll(async () => {
    await conn?.end();
    await store?.close();
    await db?.drop();
  });

  const handlerReads = (): Promise<number> => readsSoFar(conn);

  /** Handler reads of `statement` alone, less those of reading the counters; its rows. */
  async function readsOf(statement: string, values: unknown[]): Promise<{ reads: number; rows: unknown[] }> {
    const idleBefore = await handlerReads();
    await conn.query('DO 0');
    const idle = (await handlerReads()) - idleBefore;
    await conn.query('START TRANSACTION');
    try {
      const before = await handlerReads();
      const [rows] = (await conn.query({ sql: statement, values })) as [unknown[], unknown];
      return { reads: (await handlerReads()) - before - idle, rows };
    } finally {
      await conn.query('ROLLBACK');
    }
  }

  it('the claim of one type walks its own range of idx_claim_type: a few dozen reads, not 100,000', async () => {
    const values = [now, ['small'], 10];
    const [plan] = (await conn.query({ sql: `EXPLAIN ${sql.lockDue}`, values })) as [
      { table: string | null; key: string | null; Extra: string | null }[],
      unknown,
    ];
    const scan = plan.find((r) => r.table === 'async_command');
    expect(scan?.key, JSON.stringify(plan)).toBe('idx_claim_type');
    expect(scan?.Extra ?? '').not.toMatch(/filesort/);
    const { reads, rows } = await readsOf(sql.lockDue, values);
    expect(rows).toHaveLength(10);
    expect(reads).toBeLessThanOrEqual(100);
  });

  it('the first read of a claim of several types reads the limit of each from its own range, never the big one', async () => {
    const values = [now, 'small', 10, now, 'other', 10, 10];
    const [plan] = (await conn.query({ sql: `EXPLAIN ${sql.firstOfTypes(2)}`, values })) as [
      { table: string | null; key: string | null; Extra: string | null }[],
      unknown,
    ];
    const members = plan.filter((r) => r.table === 'async_command');
    expect(members.map((r) => r.key)).toEqual(['idx_claim_type', 'idx_claim_type']);
    for (const m of members) expect(m.Extra ?? '').not.toMatch(/filesort/);
    const { reads, rows } = await readsOf(sql.firstOfTypes(2), values);
    // The small type's 30 were submitted before the other's: the first 10 are all its own.
    const shares = (rows as { type: string; n: string | number }[]).map(({ type, n }) => ({
      type,
      n: Number(n),
    }));
    expect(shares).toEqual([{ type: 'small', n: 10 }]);
    expect(reads).toBeLessThanOrEqual(200);
  });

  it('the store claims the small types, in claim order across them, behind the big one', async () => {
    const claimed = await store.claimDue({
      types: ['other', 'small'],
      limit: 40,
      now: new Date(Date.now() + 60_000),
      token: 'per-type',
      leaseMs: 60_000,
    });
    // The small type's 30 were submitted first, then the other's: all 30, then 10 of the other.
    expect(claimed.map((c) => c.type)).toEqual([...Array(30).fill('small'), ...Array(10).fill('other')]);
    expect((await store.get(claimed[0]!.id))?.status).toBe('RUNNING');
  });
});
