import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConnection } from 'mysql2/promise';
import type { Connection } from 'mysql2/promise';
import { moveSql } from '../src/history.js';
import { mysqlSql } from '../src/sql.js';
import type { MysqlCommandStore } from '../src/store.js';
import { freshDatabase, openStore, perProcess } from './databases.js';

interface PlanRow {
  table: string | null;
  type: string | null;
  key: string | null;
  rows: number | string | null;
  Extra: string | null;
}

const FINISHED = 20_000;
const PENDING = 300;
const HELD = 10;
const TOKEN = 'held';
/**
 * Rows and index entries one statement may read (InnoDB handler reads) for at most ten rows of its
 * own: their lookups plus a few probes. Walking the table would read more than 20,000.
 */
const MAX_READS = 100;
const sql = mysqlSql('async_command');

/** How a plan may reach its rows: by key (MariaDB may add a rowid filter), never by walking an index or the table. */
const KEYED_ACCESS = /^(const|eq_ref|ref|range|system)(\|filter)?$/;

interface Case {
  readonly name: string;
  readonly statement: string;
  readonly values: readonly unknown[];
  /** The index each base-table access must use. */
  readonly key: string;
}

/**
 * The hot statements use their indexes, so finished history does not slow them down: checked on
 * the query plans and on the rows each statement really reads when run (and rolled back). Speed
 * itself is the benchmark's business, never a timed assertion here.
 */
describe('query plans with finished history in the table', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let store: MysqlCommandStore;
  let conn: Connection;
  let held: string[] = [];
  let pending: string[] = [];
  let readsOfNothing = 0;
  const now = new Date(Date.now() + 60_000).toISOString().slice(0, 23).replace('T', ' ');

  beforeAll(async () => {
    db = await freshDatabase(perProcess('asynccmd_mysql_plans'));
    store = await openStore(db.url);
    conn = await createConnection({ uri: db.url, supportBigNumbers: true, bigNumberStrings: true });
    for (let i = 0; i < FINISHED / 2000; i++) {
      await store.insert(
        conn,
        Array.from({ length: 2000 }, (_, n) => ({
          type: 'work', // the same type as the due rows: history the claim's type filter cannot skip
          payloadJson: '{}',
          maxRetry: 0,
          bizKey: `b${n}`,
        })),
      );
    }
    // As complete() leaves them: each finished row carries its call's marker. Each is a schedule's
    // tick, which the store's move to the history leaves where it is: the plans must hold with
    // finished rows in the command table (ticks, dead letters, rows from before the history).
    await conn.query(
      `UPDATE async_command SET status = 'SUCCESS', finished_at = UTC_TIMESTAMP(3), claim_token = CONCAT('done:', id),
         schedule_name = 'plans', schedule_tick = '2000-01-01' + INTERVAL id SECOND`,
    );
    pending = await store.insert(
      conn,
      // Priorities mixed, so the claim's order is (priority, next_run_at, id), not the insertion order.
      Array.from({ length: PENDING }, (_, n) => ({
        type: 'work',
        payloadJson: '{}',
        maxRetry: 0,
        priority: n % 5,
      })),
    );
    const claimed = await store.claimDue({
      types: ['work'],
      limit: HELD,
      now: new Date(Date.now() + 1000),
      token: TOKEN,
      leaseMs: 60_000,
    });
    held = claimed.map((c) => c.id);
    pending = pending.filter((id) => !held.includes(id));
    await conn.query('ANALYZE TABLE async_command');
    readsOfNothing = await reads('DO 0', []);
  }, 60_000);
  afterAll(async () => {
    await conn?.end();
    await store?.close();
    await db?.drop();
  });

  async function plan(statement: string, values: readonly unknown[]): Promise<PlanRow[]> {
    const [rows] = await conn.query({ sql: `EXPLAIN ${statement}`, values: [...values] });
    return rows as PlanRow[];
  }

  async function handlerReads(): Promise<number> {
    const [rows] = await conn.query("SHOW SESSION STATUS LIKE 'Handler_read%'");
    return (rows as { Value: string }[]).reduce((sum, r) => sum + Number(r.Value), 0);
  }

  /** Rows and index entries the statement reads when it runs; its writes are rolled back. */
  async function reads(statement: string, values: readonly unknown[]): Promise<number> {
    await conn.query('START TRANSACTION');
    try {
      const before = await handlerReads();
      await conn.query({ sql: statement, values: [...values] });
      return (await handlerReads()) - before - readsOfNothing;
    } finally {
      await conn.query('ROLLBACK');
    }
  }

  async function expectKeyed(c: Case): Promise<void> {
    const rows = await plan(c.statement, c.values);
    const tables = rows.filter((r) => r.table !== null && !r.table.startsWith('<'));
    for (const p of tables) {
      expect(p.type ?? '', `${c.name}: ${JSON.stringify(p)}`).toMatch(KEYED_ACCESS);
      expect(p.key ?? '', `${c.name}: ${JSON.stringify(p)}`).toMatch(new RegExp(`^${c.key}\\b`));
    }
    // No table left in the plan only when the optimizer already read the row by key: "Impossible
    // WHERE noticed after reading const tables".
    if (tables.length === 0) expect(rows[0]?.Extra ?? '', c.name).toMatch(/after reading const tables/);
    expect(await reads(c.statement, c.values), c.name).toBeLessThanOrEqual(MAX_READS);
  }

  /** sql.ts refs(tokens) for the first n held rows: under their own token, or split over two tokens. */
  const refs = (n: number, tokens: 1 | 2 = 1): unknown[] => {
    const ids = held.slice(0, n);
    if (tokens === 1) return [ids, TOKEN];
    // One ref alone has one token: its second list repeats it rather than being empty.
    const half = Math.ceil(n / 2);
    return [ids, TOKEN, ids.slice(0, half), 'another round', n > 1 ? ids.slice(half) : ids];
  };

  it('the table holds the history the checks are about', async () => {
    const [rows] = await conn.query('SELECT COUNT(*) AS n FROM async_command');
    expect(Number((rows as { n: string }[])[0]?.n)).toBe(FINISHED + PENDING);
    expect(held).toHaveLength(HELD);
  });

  it.each([1, 2, 10])(
    'writes and reads naming %i claim ref(s) or id(s) take a primary-key range of exactly their rows',
    async (n) => {
      const ids = held.slice(0, n);
      const cases: Case[] = [
        { name: 'complete', statement: sql.complete(1), values: refs(n), key: 'PRIMARY' },
        { name: 'complete of two rounds', statement: sql.complete(2), values: refs(n, 2), key: 'PRIMARY' },
        {
          name: 'completedBy',
          statement: sql.completedBy(1),
          values: [...refs(n), ...refs(n)],
          key: 'PRIMARY',
        },
        {
          name: 'failedBefore',
          statement: sql.failedBefore(n),
          values: [ids, ...ids.flatMap((id) => [id, TOKEN, 'PENDING', 1])],
          key: 'PRIMARY',
        },
        { name: 'heartbeat', statement: sql.heartbeat(1), values: [1000, ...refs(n)], key: 'PRIMARY' },
        {
          name: 'heartbeat of two rounds',
          statement: sql.heartbeat(2),
          values: [1000, ...refs(n, 2)],
          key: 'PRIMARY',
        },
        { name: 'heldRefs', statement: sql.heldRefs(1), values: refs(n), key: 'PRIMARY' },
        { name: 'lockHeld', statement: sql.lockHeld(1), values: refs(n), key: 'PRIMARY' },
        { name: 'lockHeld of two rounds', statement: sql.lockHeld(2), values: refs(n, 2), key: 'PRIMARY' },
        { name: 'release', statement: sql.release, values: [ids], key: 'PRIMARY' },
        { name: 'lockHeldBack', statement: sql.lockHeldBack(1), values: refs(n), key: 'PRIMARY' },
        { name: 'releaseRevoked', statement: sql.releaseRevoked, values: [ids], key: 'PRIMARY' },
        {
          name: 'failHeld',
          statement: sql.failHeld(n),
          values: [
            ...ids.flatMap((id) => [id, 'PENDING']),
            ...ids.flatMap((id) => [id, 'boom']),
            ...ids.flatMap((id) => [id, 'PENDING']),
            ...ids.flatMap((id) => [id, 1]),
            ...ids.flatMap((id) => [id, now]),
            ...ids.flatMap((id) => [id, 'boom']),
            ...ids.flatMap((id) => [id, 'PENDING']),
            ids,
          ],
          key: 'PRIMARY',
        },
        {
          name: 'reclaim',
          statement: sql.reclaim,
          values: [5, 5, 'dead', 5, 5, 'dead', 5, ids],
          key: 'PRIMARY',
        },
        { name: 'getMany', statement: sql.getMany, values: [ids, ids], key: 'PRIMARY' },
        {
          name: 'markClaimed',
          statement: sql.markClaimed,
          values: ['t', 'worker', 1000, pending.slice(0, n)],
          key: 'PRIMARY',
        },
      ];
      for (const c of cases) await expectKeyed(c);
    },
  );

  it("a list page walks each table's creation index newest first and reads only its own rows", async () => {
    const [newest] = await conn.query('SELECT MAX(created_at) AS at FROM async_command');
    const at = (newest as { at: string }[])[0]?.at;
    const before = [at, at, held[0]];
    for (const [name, statement, values, keys] of [
      ['first page', sql.list([], true), [11, 11, 11], ['idx_created', 'idx_h_created']],
      [
        'next page',
        sql.list(['before'], true),
        [...before, 11, ...before, 11, 11],
        ['idx_created', 'idx_h_created'],
      ],
      ['a page of other statuses', sql.list(['status'], false), [['DEAD'], 11], ['idx_created']],
    ] as const) {
      const rows = (await plan(statement, values)).filter(
        (r) => r.table !== null && !r.table.startsWith('<'),
      );
      expect(
        rows.map((r) => r.key),
        name,
      ).toEqual(keys);
      for (const r of rows) expect(r.Extra ?? '', name).not.toMatch(/filesort/);
      if (name !== 'a page of other statuses')
        expect(await reads(statement, values), name).toBeLessThanOrEqual(MAX_READS);
    }
  });

  it('single-row writes and reads by id go through the primary key', async () => {
    const [id, other] = held as [string, string];
    const due = pending[0] as string;
    const cases: Case[] = [
      {
        name: 'failOne',
        statement: sql.failOne,
        values: ['PENDING', 'boom', 'PENDING', 1, now, 'boom', 'PENDING', id, TOKEN],
        key: 'PRIMARY',
      },
      { name: 'retry', statement: sql.retry, values: [now, other], key: 'PRIMARY' },
      { name: 'requeue', statement: sql.requeue, values: [now, other], key: 'PRIMARY' },
      { name: 'kill', statement: sql.kill, values: ['why', 'why', other], key: 'PRIMARY' },
      { name: 'cancel', statement: sql.cancel, values: ['why', due], key: 'PRIMARY' },
      { name: 'get', statement: sql.get, values: [id, id], key: 'PRIMARY' },
      {
        name: 'succeededUnder',
        statement: sql.succeededUnder,
        values: [id, TOKEN, id, TOKEN],
        key: 'PRIMARY',
      },
      {
        name: 'claimById',
        statement: sql.claimById,
        values: ['t', 'worker', 1000, due, now, 1],
        key: 'PRIMARY',
      },
      { name: 'firstOfKeyById', statement: sql.firstOfKeyById, values: [due], key: '(PRIMARY|idx_keyed)' },
      {
        name: 'claimByIdOfTypes',
        statement: sql.claimByIdOfTypes,
        values: ['t', 'worker', 1000, due, now, ['work'], 1],
        key: 'PRIMARY',
      },
      { name: 'claimedRow', statement: sql.claimedRow, values: [id, TOKEN], key: 'PRIMARY' },
    ];
    for (const c of cases) await expectKeyed(c);
  });

  it('reads by token use the token index', async () => {
    await expectKeyed({
      name: 'claimedBy',
      statement: sql.claimedBy,
      values: [TOKEN],
      key: 'idx_claim_token',
    });
  });

  it('step 1 (SKIP LOCKED) walks idx_claim_type in order: no full scan, no sort, stops after LIMIT', async () => {
    const [p] = await plan(sql.lockDue, [now, ['work'], 10]);
    expect(p?.Extra ?? '').not.toMatch(/filesort/);
    await expectKeyed({
      name: 'lockDue',
      statement: sql.lockDue,
      values: [now, ['work'], 10],
      // The ordering-key check reads idx_keyed, for keyed rows only.
      key: '(idx_claim_type|idx_keyed)',
    });
    await expectKeyed({
      name: 'anyDue',
      statement: sql.anyDue,
      values: [now, ['work']],
      key: '(idx_claim_type|idx_keyed)',
    });
  });

  it('step 1 (legacy) reads LIMIT candidates from idx_claim_type, then each by primary key', async () => {
    const values = [now, ['work'], 10, 't', 'worker', 1000, now, ['work']];
    const rows = await plan(sql.markDueLegacy, values);
    const candidates = rows.find((r) => r.table === 'async_command');
    expect(candidates?.key, JSON.stringify(rows)).toBe('idx_claim_type');
    expect(candidates?.Extra ?? '').not.toMatch(/filesort/);
    const updated = rows.find((r) => r.table === 'c');
    expect(updated?.key, JSON.stringify(rows)).toBe('PRIMARY');
    expect(updated?.type, JSON.stringify(rows)).toBe('eq_ref');
    // Candidates first, so the update never walks the table looking for them.
    expect(rows.findIndex((r) => r.table?.startsWith('<derived'))).toBeLessThan(
      rows.indexOf(updated as PlanRow),
    );
    await expectKeyed({
      name: 'markDueLegacy',
      statement: sql.markDueLegacy,
      values,
      key: '(idx_claim_type|idx_keyed|PRIMARY)',
    });
  });

  it('step 1 through unlocked candidates reads 2 × LIMIT of them from idx_claim_type in order, then locks each by primary key', async () => {
    const values = [now, ['work'], 20, now, 10];
    const rows = await plan(sql.lockDueUnlocked, values);
    const candidates = rows.find((r) => r.table === 'async_command');
    expect(candidates?.key, JSON.stringify(rows)).toBe('idx_claim_type');
    expect(candidates?.Extra ?? '').not.toMatch(/filesort/);
    const locked = rows.find((r) => r.table === 'c');
    expect(locked?.key, JSON.stringify(rows)).toBe('PRIMARY');
    expect(locked?.type, JSON.stringify(rows)).toBe('eq_ref');
    expect(locked?.Extra ?? '').not.toMatch(/filesort/);
    await expectKeyed({
      name: 'lockDueUnlocked',
      statement: sql.lockDueUnlocked,
      values,
      key: '(idx_claim_type|idx_keyed|PRIMARY)',
    });
  });

  it('the idempotency holder is one unique-index lookup', async () => {
    const [p] = await plan(sql.activeHolder.replace(' LOCK IN SHARE MODE', ''), ['work', 'b1']);
    expect(['uq_active_key', null]).toContain(p?.key); // null: "Impossible WHERE noticed after reading const tables"
    expect(p?.type).not.toBe('ALL');
  });

  it('the health probe counts dead letters and finds the oldest due command on status-leading indexes', async () => {
    const rows = await plan(sql.healthProbe, [100, now]);
    const deadLetters = rows.find((r) => r.table === 'async_command');
    expect(deadLetters?.Extra ?? '', JSON.stringify(rows)).toMatch(/Using index/);
    // MIN(next_run_at) on the (status, next_run_at, id) prefix is one index lookup, done while planning.
    expect(rows.map((r) => r.Extra).join(), JSON.stringify(rows)).toMatch(/Select tables optimized away/);
    await expectKeyed({
      name: 'healthProbe',
      statement: sql.healthProbe,
      values: [100, now],
      key: '(idx_due|idx_finished)',
    });
  });

  it('outcome counts read a range of finish times in each table, never the history around it', async () => {
    const from = new Date(Date.now() + 3_600_000);
    const to = new Date(from.getTime() + 60_000);
    const values = [10_000, 100_000, from, to, from, to];
    await expectKeyed({
      name: 'outcomeCounts',
      statement: sql.outcomeCounts(2),
      values,
      key: '(idx_finished|idx_h_finished)',
    });
    expect(await reads(sql.outcomeCounts(2), values)).toBeLessThan(MAX_READS);
  });

  it('a purge batch walks (status, finished_at) without sorting every match', async () => {
    const [p] = await plan(sql.purge, ['SUCCESS', now, 100]);
    expect(p?.key).toBe('idx_finished');
    expect(p?.Extra ?? '').not.toMatch(/filesort/);
    const [h] = await plan(sql.purgeHistory, [now, 100]);
    expect(h?.key).toBe('idx_h_finished');
    expect(h?.Extra ?? '').not.toMatch(/filesort/);
  });

  it('a move to the history reads (status, finished_at, id) from its position on, then locks each candidate by primary key', async () => {
    const { pick } = moveSql('async_command', true);
    const values = ['1000-01-01 00:00:00', '1000-01-01 00:00:00', 0, 100];
    const rows = await plan(pick, values);
    const candidates = rows.find((r) => r.table === 'async_command' && r.key === 'idx_finished');
    expect(candidates, JSON.stringify(rows)).toBeDefined();
    expect(candidates?.Extra ?? '').not.toMatch(/filesort/);
    const locked = rows.find((r) => r.table === 'c');
    expect(locked?.key, JSON.stringify(rows)).toBe('PRIMARY');
    expect(locked?.type, JSON.stringify(rows)).toBe('eq_ref');
    // From a position past every row: a few index probes, not the 20,000 finished rows.
    const past = new Date(Date.now() + 3_600_000).toISOString().slice(0, 23).replace('T', ' ');
    expect(await reads(pick, [past, past, 0, 100])).toBeLessThanOrEqual(MAX_READS);
  });
});
