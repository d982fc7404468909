import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConnection } from 'mysql2/promise';
import type { Connection } from 'mysql2/promise';
import { mysqlSql } from '../src/sql.js';
import type { MysqlCommandStore } from '../src/store.js';
import { DIGITS, freshDatabase, handlerReads as readsSoFar, openStore, perProcess } from './databases.js';

const WAITING = 1_000_000;
const DUE = 10;
const sql = mysqlSql('async_command');

/**
 * Commands waiting for others (status WAITING) are outside the claim's index range (idx_claim_type
 * leads with status): with a million of them and a few due, the claim reads the due ones and
 * stops. Checked on the plan and on the rows the statement really reads (InnoDB handler reads).
 */
describe('the claim with 1,000,000 waiting commands', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let store: MysqlCommandStore;
  let conn: Connection;
  const now = new Date(Date.now() + 60_000).toISOString().slice(0, 23).replace('T', ' ');

  beforeAll(async () => {
    db = await freshDatabase(perProcess('asynccmd_mysql_waiting'));
    store = await openStore(db.url);
    conn = await createConnection({ uri: db.url, supportBigNumbers: true, bigNumberStrings: true });
    await store.insert(
      conn,
      Array.from({ length: DUE }, () => ({ type: 'work', payloadJson: '{}', maxRetry: 0 })),
    );
    // Six cross-joined digits: a million rows on MySQL and MariaDB alike, in one statement.
    await conn.query(
      `INSERT INTO async_command (type, payload, status, waiting_for, max_retry, next_run_at, headers, created_at, updated_at)
       SELECT 'work', '{}', 'WAITING', 1, 0, UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE, '{}', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3)
       FROM (${DIGITS}) a, (${DIGITS}) b, (${DIGITS}) c, (${DIGITS}) d, (${DIGITS}) e, (${DIGITS}) f`,
    );
    await conn.query('ANALYZE TABLE async_command');
  }, 600_000);
  afterAll(async () => {
    await conn?.end();
    await store?.close();
    await db?.drop();
  });

  const handlerReads = (): Promise<number> => readsSoFar(conn);

  it('walks idx_claim_type over the due rows only, never a waiting one', async () => {
    const [count] = (await conn.query(
      "SELECT COUNT(*) AS n FROM async_command WHERE status = 'WAITING'",
    )) as [{ n: string }[], unknown];
    expect(Number(count[0]?.n)).toBe(WAITING);
    const values = [now, ['work'], 50];
    const [plan] = (await conn.query({ sql: `EXPLAIN ${sql.lockDue}`, values })) as [
      { table: string | null; key: string | null; Extra: string | null }[],
      unknown,
    ];
    const scan = plan.find((r) => r.table === 'async_command');
    expect(scan?.key, JSON.stringify(plan)).toBe('idx_claim_type');
    expect(scan?.Extra ?? '').not.toMatch(/filesort/);
    // Handler reads of the statement alone: less those of reading the counters (a statement that reads nothing).
    const readsOf = async (run: () => Promise<unknown>): Promise<number> => {
      const before = await handlerReads();
      await run();
      return (await handlerReads()) - before;
    };
    const idle = await readsOf(() => conn.query('DO 0'));
    await conn.query('START TRANSACTION');
    try {
      let rows: unknown[] = [];
      const read = await readsOf(async () => {
        [rows] = (await conn.query({ sql: sql.lockDue, values })) as [unknown[], unknown];
      });
      expect(rows).toHaveLength(DUE);
      // The due rows, a probe past them and the key checks: a few dozen reads, never a million.
      expect(read - idle).toBeLessThanOrEqual(100);
    } finally {
      await conn.query('ROLLBACK');
    }
  });
});
