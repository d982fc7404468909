import { randomUUID } from 'node:crypto';
import { silentLogger } from '@asynccmd/core';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAST_COMMIT_STEP, HotStatements } from '../src/pipeline/hot-statements.js';
import { createPostgresStore, type PostgresCommandStore } from '../src/index.js';
import { command, DATABASE_URL, dropSchema, openStore, uniqueSchema } from './helpers.js';

/**
 * The store's transaction-pooler path (`pooler: 'transaction'`) on a direct connection, where a
 * session's state can be inspected: nothing is left prepared on it, and the hot path's settings
 * last for its own transaction only. test/pooler runs it through a real PgBouncer.
 */
const schema = uniqueSchema('acpg_pooled');
let store: PostgresCommandStore;
/** One connection, so what the store left on its session is what the next query sees. */
let single: pg.Pool;

beforeAll(async () => {
  store = await openStore(schema, { pooler: 'transaction', poolConfig: { max: 1 } });
  single = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
});

afterAll(async () => {
  await store?.close();
  await single?.end();
  await dropSchema(schema);
});

const settingStatement = { name: 'unused', text: `SELECT current_setting('synchronous_commit') AS setting` };

describe('PostgreSQL store behind a transaction pooler', () => {
  it('refuses a pooler or listenConnection it cannot use, with a typed error', () => {
    const bad = [
      { pooler: 'session' },
      { pooler: true },
      { pooler: 'transaction', listenConnection: 42 },
      { listenConnection: null },
    ];
    for (const options of bad) {
      expect(() => createPostgresStore({ connectionString: DATABASE_URL, ...options } as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
    }
  });

  it('leaves no prepared statement on its connections, whichever path a statement took', async () => {
    const [id] = await store.transaction((tx) => store.insert(tx, [command('pooled.a')]));
    await store.transaction(async (tx) => {
      store.capabilities.commitRiding?.notify(tx);
      await store.insert(tx, [command('pooled.a'), command('pooled.a')]);
      await store.insertIdempotent(tx, { ...command('pooled.a'), bizKey: 'once' });
    });
    const token = randomUUID();
    const claimed = await Promise.all([
      store.claimDue({
        types: ['pooled.a'],
        limit: 2,
        now: new Date(Date.now() + 1),
        token,
        leaseMs: 60_000,
      }),
      store.claimById({ id: id!, now: new Date(Date.now() + 1), token, leaseMs: 60_000 }),
    ]);
    const refs = claimed.flat().flatMap((c) => (c ? [{ id: c.id, token }] : []));
    expect(refs.length).toBeGreaterThan(0);
    await Promise.all([store.heartbeat(refs, 60_000), store.complete(refs.slice(0, 1))]);
    await store.release(refs.slice(1));
    for (const pool of [store.pool, store.hotPool]) {
      const { rows } = await pool.query('SELECT name FROM pg_prepared_statements');
      expect(rows).toEqual([]);
    }
  });

  it('reads its times in ISO form whatever date style the session began with', async () => {
    // A session set to another style at start-up (PgBouncer would restore it on every server connection).
    const sql = await openStore(schema, {
      pooler: 'transaction',
      poolConfig: { max: 1, options: '-c DateStyle=SQL,DMY' },
    });
    try {
      const before = Date.now();
      const [id] = await sql.transaction((tx) => sql.insert(tx, [command('pooled.dates')]));
      const record = await sql.get(id!);
      expect(Math.abs(record!.createdAt.getTime() - before)).toBeLessThan(60_000);
      const { rows } = await sql.pool.query<{ style: string }>(
        "SELECT current_setting('DateStyle') AS style",
      );
      expect(rows[0]?.style).toBe('ISO, DMY');
    } finally {
      await sql.close();
    }
  });

  it('sets the fast commit for each batch it sends, alone or together, and never for the session', async () => {
    const hot = new HotStatements(single, () => Promise.reject(new Error('not used')), silentLogger, {
      prefix: [FAST_COMMIT_STEP],
    });
    const alone = await hot.run<{ setting: string }>({ ...settingStatement, values: [] });
    const together = await Promise.all([
      hot.run<{ setting: string }>({ ...settingStatement, values: [] }),
      hot.run<{ setting: string }>({ ...settingStatement, values: [] }),
    ]);
    expect([alone, ...together].map((rows) => rows[0]?.setting)).toEqual(['off', 'off', 'off']);
    // The same (only) connection, after those transactions: the server's own setting.
    const after = await single.query<{ setting: string }>(settingStatement.text);
    expect(after.rows[0]?.setting).toBe('on');
    expect((await single.query('SELECT name FROM pg_prepared_statements')).rows).toEqual([]);
  });

  it('answers each statement of a failed batch for itself', async () => {
    const hot = new HotStatements(single, () => Promise.reject(new Error('not used')), silentLogger, {
      prefix: [FAST_COMMIT_STEP],
    });
    const [good, bad] = await Promise.allSettled([
      hot.run<{ setting: string }>({ ...settingStatement, values: [] }),
      hot.run({ name: 'unused', text: 'SELECT 1 / 0', values: [] }),
    ]);
    expect(good).toMatchObject({ status: 'fulfilled', value: [{ setting: 'off' }] });
    expect(bad).toMatchObject({ status: 'rejected', reason: { code: '22012' } });
  });
});
