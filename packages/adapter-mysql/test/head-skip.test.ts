import { randomUUID } from 'node:crypto';
import { createConnection } from 'mysql2/promise';
import type { Connection } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { moveSql } from '../src/history.js';
import { mysqlSql } from '../src/sql.js';
import type { MysqlCommandStore } from '../src/store.js';
import { freshDatabase, openStore, perProcess } from './databases.js';

const sql = mysqlSql('async_command');
const CLAIMED = 10_000;

/** Pages InnoDB touched for a statement (MariaDB's ANALYZE FORMAT=JSON), run in a transaction rolled back. */
async function pagesRead(conn: Connection, statement: string, values: unknown[]): Promise<number> {
  await conn.query('START TRANSACTION');
  try {
    const [rows] = await conn.query({ sql: `ANALYZE FORMAT=JSON ${statement}`, values });
    const text = (rows as { ANALYZE: string }[])[0]?.ANALYZE ?? '';
    return [...text.matchAll(/"pages_accessed": (\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  } finally {
    await conn.query('ROLLBACK');
  }
}

const claim = (store: MysqlCommandStore, types: string[], limit: number) =>
  store.claimDue({ types, limit, now: new Date(Date.now() + 1), token: randomUUID(), leaseMs: 60_000 });

/**
 * Claims while a snapshot is held elsewhere (core store-kit head-skip.ts): InnoDB purges no
 * delete-marked entry the snapshot may still need, so every command claimed leaves one at the head
 * of idx_claim_type, and a locking read under READ COMMITTED looks each of them up in the primary key.
 */
describe('claims past a slow head (MySQL)', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let plain: MysqlCommandStore;
  let skipping: MysqlCommandStore;
  let conn: Connection;

  beforeAll(async () => {
    db = await freshDatabase(perProcess('asynccmd_mysql_headskip'));
    plain = await openStore(db.url, { slowHeadSkip: false });
    // Every claim from the head counts as slow: the claims after it read unlocked candidates.
    skipping = await openStore(db.url, { slowHeadSkip: { slowMs: 0 } });
    conn = await createConnection({ uri: db.url, supportBigNumbers: true, bigNumberStrings: true });
    await conn.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
    // The recursion limit of the row generator: MariaDB's name, then MySQL's.
    await conn.query('SET SESSION max_recursive_iterations = 100000').catch(() => undefined);
    await conn.query('SET SESSION cte_max_recursion_depth = 100000').catch(() => undefined);
  });
  afterAll(async () => {
    await conn?.end();
    await Promise.all([plain?.close(), skipping?.close()]);
    await db?.drop();
  });

  it('behind a held snapshot the unlocked candidates pass the dead head that the locking read looks up one by one', async () => {
    await conn.query(
      `INSERT INTO async_command (type, payload, status, max_retry, next_run_at, headers, created_at, updated_at)
       WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
       SELECT 'held', '{}', 'PENDING', 0, UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE, '{}', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3) FROM n`,
      [CLAIMED + 1_000],
    );
    const holder = await createConnection(db.url);
    try {
      await holder.query('START TRANSACTION WITH CONSISTENT SNAPSHOT');
      await holder.query('SELECT COUNT(*) FROM async_command');
      for (let done = 0; done < CLAIMED; done += 500) {
        const rows = await claim(plain, ['held'], 500);
        expect(rows).toHaveLength(500);
        await plain.complete(rows.map((r) => ({ id: r.id, token: r.claimToken })));
      }
      const now = new Date(Date.now() + 1).toISOString().slice(0, 23).replace('T', ' ');
      const locking = await pagesRead(conn, sql.lockDue, [now, ['held'], 500]);
      const unlocked = await pagesRead(conn, sql.lockDueUnlocked, [now, ['held'], 1_000, now, 500]);
      // Both answer the same 500 rows; the locking read also looks up the 10,000 claimed rows' entries.
      const [byLocking] = await conn.query({ sql: sql.lockDue, values: [now, ['held'], 500] });
      const [byUnlocked] = await conn.query({
        sql: sql.lockDueUnlocked,
        values: [now, ['held'], 1_000, now, 500],
      });
      expect((byUnlocked as { id: string }[]).map((r) => r.id)).toEqual(
        (byLocking as { id: string }[]).map((r) => r.id),
      );
      console.info(`pages read behind ${CLAIMED} claimed rows: locking ${locking}, unlocked ${unlocked}`);
      expect(locking, `locking ${locking}, unlocked ${unlocked}`).toBeGreaterThan(CLAIMED);
      expect(unlocked, `locking ${locking}, unlocked ${unlocked}`).toBeLessThan(locking / 4);
    } finally {
      await holder.end();
    }
  });

  it('behind a held snapshot the move to the history passes the dead entries of the rows it moved before', async () => {
    const MOVED = 5_000;
    await conn.query(
      `INSERT INTO async_command (type, payload, status, max_retry, next_run_at, headers, created_at, updated_at, started_at, finished_at)
       WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
       SELECT 'moved', '{}', 'SUCCESS', 0, UTC_TIMESTAMP(3), '{}', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3),
              UTC_TIMESTAMP(3), UTC_TIMESTAMP(3) - INTERVAL 30 SECOND FROM n`,
      [MOVED],
    );
    // The command with the highest id stays in the command table: one more, unfinished.
    await plain.transaction((tx) => plain.insert(tx, [{ type: 'last', payloadJson: '{}', maxRetry: 0 }]));
    const holder = await createConnection(db.url);
    try {
      await holder.query('START TRANSACTION WITH CONSISTENT SNAPSHOT');
      await holder.query('SELECT COUNT(*) FROM async_command');
      // A purge whose cutoff nothing passes only moves: every finished row, deleted from the table.
      await plain.purge({ olderThan: new Date('2000-01-01T00:00:00Z'), statuses: ['SUCCESS'], limit: 1000 });
      const [left] = await conn.query("SELECT COUNT(*) AS n FROM async_command WHERE type = 'moved'");
      expect(Number((left as { n: number }[])[0]?.n)).toBe(0);
      // The next move reads from before them all, as one a minute back of its newest row does.
      const start = '1000-01-01 00:00:00.000';
      const pages = await pagesRead(conn, moveSql('async_command', true).pick, [start, start, '0', 2_000]);
      console.info(`pages a move read behind ${MOVED} moved rows: ${pages}`);
      expect(pages).toBeLessThan(MOVED / 5);
    } finally {
      await holder.end();
    }
  });

  it('through unlocked candidates: a command held back by a revoked claim, a later one of an ordering key and another type stay unclaimed', async () => {
    const [first, second] = await skipping.transaction((tx) =>
      skipping.insert(tx, [
        { type: 'keyed', payloadJson: '{}', maxRetry: 0, orderingKey: 'k' },
        { type: 'keyed', payloadJson: '{}', maxRetry: 0, orderingKey: 'k' },
      ]),
    );
    const [revoked, free] = await skipping.transaction((tx) =>
      skipping.insert(tx, [
        { type: 'keyed', payloadJson: '{}', maxRetry: 0 },
        { type: 'keyed', payloadJson: '{}', maxRetry: 0 },
      ]),
    );
    await skipping.transaction((tx) =>
      skipping.insert(tx, [{ type: 'other', payloadJson: '{}', maxRetry: 0 }]),
    );
    // Claimed by id, then requeued: PENDING again, held back while the old lease lasts.
    const old = await skipping.claimById({
      id: revoked as string,
      now: new Date(Date.now() + 1),
      token: randomUUID(),
      leaseMs: 60_000,
    });
    expect(old?.id).toBe(revoked);
    await skipping.requeue(revoked as string, new Date());
    // The first claim reads from the head (and counts as slow); the second reads unlocked candidates.
    const fromHead = await claim(skipping, ['keyed'], 1);
    const unlocked = await claim(skipping, ['keyed'], 10);
    const claimedIds = [...fromHead, ...unlocked].map((r) => r.id).sort();
    expect(claimedIds).toEqual([first, free].sort());
    expect(claimedIds).not.toContain(second);
    expect(await claim(skipping, ['keyed'], 10)).toEqual([]);
  });
});
