import { afterAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../src/index.js';
import type { SqliteCommandStore } from '../src/index.js';
import { settleStatements } from '../src/dependencies.js';
import { sqliteSql } from '../src/sql.js';

const WAITING = 1_000_000;
const DUE = 10;

describe('the SQLite claim with 1,000,000 waiting commands', () => {
  const open: SqliteCommandStore[] = [];
  afterAll(async () => {
    for (const s of open) await s.close();
  });

  it('reads the partial claim index, which holds no waiting row, and claims the due ones', async () => {
    const store = createSqliteStore({ filename: ':memory:' });
    open.push(store);
    await store.migrate();
    await store.transaction((tx) =>
      store.insert(
        tx,
        Array.from({ length: DUE }, () => ({ type: 'work', payloadJson: '{}', maxRetry: 0 })),
      ),
    );
    store.db
      .prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
         INSERT INTO async_command (type, payload, status, waiting_for, max_retry, next_run_at, created_at, updated_at)
         SELECT 'work', '{}', 'WAITING', 1, 0, 0, 0, 0 FROM n`,
      )
      .run(WAITING);
    // The claim's index holds PENDING rows only: a waiting row is never in what the claim walks.
    const index = store.db
      .prepare(`SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'async_command_claim_type'`)
      .pluck()
      .get() as string;
    expect(index).toMatch(/WHERE status = 'PENDING'/);
    const entries = store.db
      .prepare(
        `SELECT count(*) FROM async_command INDEXED BY async_command_claim_type
         WHERE status = 'PENDING' AND type = 'work'`,
      )
      .pluck()
      .get();
    expect(entries).toBe(DUE);
    const plan = (
      store.db.prepare(`EXPLAIN QUERY PLAN ${sqliteSql('async_command').claimDue}`).all({
        token: 't',
        instance: 'worker',
        leaseMs: 1,
        now: Date.now() + 60_000,
        type: 'work',
        limit: 50,
      }) as { detail: string }[]
    )
      .map((r) => r.detail)
      .join('; ');
    expect(plan).toContain('async_command_claim_type');
    expect(plan).not.toContain('TEMP B-TREE');
    const claimed = await store.claimDue({
      types: ['work'],
      limit: 50,
      now: new Date(Date.now() + 60_000),
      token: 't',
      leaseMs: 60_000,
    });
    expect(claimed).toHaveLength(DUE);
  }, 120_000);

  it('settles the dependants of a completion by rowid: its cost does not grow with the waiting rows', async () => {
    const store = createSqliteStore({ filename: ':memory:' });
    open.push(store);
    await store.migrate();
    const [first] = await store.transaction((tx) =>
      store.insert(tx, [{ type: 'work', payloadJson: '{}', maxRetry: 0 }]),
    );
    const [next] = await store.transaction((tx) =>
      store.dependencies.insertWaiting(tx, [
        { type: 'work', payloadJson: '{}', maxRetry: 0, dependsOn: [{ id: first! }] },
      ]),
    );
    store.db
      .prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
         INSERT INTO async_command (type, payload, status, waiting_for, max_retry, next_run_at, created_at, updated_at)
         SELECT 'work', '{}', 'WAITING', 1, 0, 0, 0, 0 FROM n`,
      )
      .run(WAITING);
    // Every statement of the triggers reaches the command table by its rowid, never through an
    // index of status, which would walk the waiting rows on every completion with dependants.
    for (const [change, statements] of Object.entries(settleStatements('async_command'))) {
      for (const statement of statements) {
        const plan = (
          store.db.prepare(`EXPLAIN QUERY PLAN ${statement.replaceAll('NEW.id', ':id')}`).all({
            id: first,
          }) as { detail: string }[]
        ).map((r) => r.detail);
        const onCommands = plan.filter((d) => / async_command( |$)/.test(d));
        expect(onCommands, `${change}: ${plan.join('; ')}`).toEqual(
          statement.startsWith('UPDATE async_command ')
            ? ['SEARCH async_command USING INTEGER PRIMARY KEY (rowid=?)']
            : [],
        );
      }
    }
    const [claimed] = await store.claimDue({
      types: ['work'],
      limit: 1,
      now: new Date(Date.now() + 60_000),
      token: 't2',
      leaseMs: 60_000,
    });
    expect(claimed?.id).toBe(first);
    expect(await store.complete([{ id: first!, token: 't2' }])).toEqual([first]);
    expect((await store.get(next!))?.status).toBe('PENDING');
  }, 120_000);
});
