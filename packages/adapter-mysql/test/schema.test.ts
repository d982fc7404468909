import { isAsyncCommandError } from '@asynccmd/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { strategyForServer } from '../src/claim-strategies.js';
import { createMysqlStore } from '../src/index.js';
import { MIGRATIONS } from '../src/migrations.js';
import { admin, freshDatabase, openStore, poolWithSession, perProcess } from './databases.js';

const DATABASE = perProcess('asynccmd_mysql_schema');

describe('schema, options and strategy choice', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  beforeAll(async () => {
    db = await freshDatabase(DATABASE);
  });
  afterAll(async () => {
    await db?.drop();
  });

  it.each(['x; DROP TABLE y', 'a`b', 'bad-name', '1abc', '', 'x'.repeat(49), 'async_command WHERE 1=1'])(
    'refuses the hostile table name %j with a typed error, before connecting',
    (table) => {
      const attempt = () => createMysqlStore({ connection: 'mysql://nobody@127.0.0.1:1/none', table });
      expect(attempt).toThrow(expect.objectContaining({ code: 'INVALID_IDENTIFIER' }));
    },
  );

  it('refuses an unknown claim strategy and a missing connection', () => {
    for (const options of [{ connection: db.url, claimStrategy: 'fastest' as unknown as 'legacy' }, {}]) {
      let error: unknown;
      try {
        createMysqlStore(options);
      } catch (e) {
        error = e;
      }
      expect(isAsyncCommandError(error) && error.code).toBe('INVALID_ARGUMENT');
    }
  });

  it('picks SKIP LOCKED from the server version, and the legacy claim below it', async () => {
    expect(strategyForServer('10.11.19-MariaDB-0+deb12u1')).toBe('skip-locked');
    expect(strategyForServer('10.6.0-MariaDB')).toBe('skip-locked');
    expect(strategyForServer('10.5.23-MariaDB-log')).toBe('legacy');
    expect(strategyForServer('8.0.36')).toBe('skip-locked');
    expect(strategyForServer('8.0.1')).toBe('skip-locked');
    expect(strategyForServer('8.0.0-dmr')).toBe('legacy');
    expect(strategyForServer('5.7.44-log')).toBe('legacy');
    expect(strategyForServer('garbage')).toBe('legacy');
    const auto = createMysqlStore({ connection: db.url });
    try {
      expect(auto.capabilities.skipLocked).toBe(false); // not known before the server was asked
      expect((await auto.claimStrategy()).name).toBe('skip-locked'); // this machine runs MariaDB 10.11
      expect(auto.capabilities).toEqual({
        skipLocked: true,
        wakeups: true,
        revocations: false,
        commitRiding: null,
        sqlExecutor: true,
      });
    } finally {
      await auto.close();
    }
    const legacy = await createMysqlStore({ connection: db.url, claimStrategy: 'legacy' });
    expect(legacy.capabilities.skipLocked).toBe(false);
    await legacy.close();
  });

  it('migrates concurrently from several stores, and again, recording each version once', async () => {
    const stores = await Promise.all(
      [0, 1, 2, 3].map(() => createMysqlStore({ connection: db.url, table: 'racing', connectionLimit: 1 })),
    );
    try {
      await Promise.all(stores.map((s) => s.migrate()));
      await Promise.all(stores.map((s) => s.migrate()));
      const versions = await admin(async (c) => {
        const [rows] = await c.query(
          `SELECT version FROM \`${DATABASE}\`.racing_migrations ORDER BY version`,
        );
        return (rows as { version: number }[]).map((r) => r.version);
      });
      expect(versions).toEqual(MIGRATIONS.map((m) => m.version));
      const store = stores[0];
      const [id] = await store!.transaction((tx) =>
        store!.insert(tx, [{ type: 't', payloadJson: '1', maxRetry: 0 }]),
      );
      expect((await store!.get(id!))?.payload).toBe(1);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it('a flow-keys migration stopped after its ALTER writes the keys when it runs again', async () => {
    const flowKeys = MIGRATIONS.find((m) => m.name === 'flow keys');
    const store = await openStore(db.url, { table: 'rekeyed' });
    try {
      await store.keyLimits.declare([{ type: 'keyed', keyField: 'tenant', maxRunning: 1 }]);
      const [id] = await store.transaction((tx) =>
        store.insert(tx, [{ type: 'keyed', payloadJson: '{"tenant":"acme"}', maxRetry: 0 }]),
      );
      const keyOf = () =>
        admin(async (c) => {
          const [rows] = await c.query(`SELECT flow_key AS k FROM \`${DATABASE}\`.rekeyed WHERE id = ?`, [
            id,
          ]);
          return (rows as { k: string | null }[])[0]?.k;
        });
      expect(await keyOf()).toBe('acme');
      // The first run committed its ALTER (the index is there), then stopped: no keys, no record.
      await admin(async (c) => {
        await c.query(`UPDATE \`${DATABASE}\`.rekeyed SET flow_key = NULL`);
        await c.query(`DELETE FROM \`${DATABASE}\`.rekeyed_migrations WHERE version = ?`, [
          flowKeys?.version,
        ]);
      });
      expect(await keyOf()).toBeNull();
      await store.migrate();
      expect(await keyOf()).toBe('acme');
      const claimed = await store.claimDue({
        types: ['keyed'],
        keyedTypes: ['keyed'],
        limit: 10,
        now: new Date(Date.now() + 60_000),
        token: 'rekeyed',
        leaseMs: 30_000,
      });
      expect(claimed.map((c) => c.id)).toEqual([id]);
    } finally {
      await store.close();
    }
  });

  it('refuses a session running NO_BACKSLASH_ESCAPES, whose quoting mysql2 does not speak', async () => {
    const pool = poolWithSession(
      db.url,
      "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')",
      1,
    );
    const store = createMysqlStore({ pool, table: 'no_backslash' });
    try {
      await expect(store.migrate()).rejects.toSatisfy(
        (e: unknown) => isAsyncCommandError(e) && e.code === 'INVALID_ARGUMENT',
      );
    } finally {
      await pool.end();
    }
  });

  it('builds the table the claim needs: utf8mb4, binary collation, DATETIME(3), the indexes', async () => {
    const store = await openStore(db.url, { table: 'shape' });
    await store.close();
    const info = await admin(async (c) => {
      const [columns] = await c.query(
        `SELECT COLUMN_NAME AS name, COLUMN_TYPE AS type, COLLATION_NAME AS coll FROM information_schema.COLUMNS
         WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'shape'`,
        [DATABASE],
      );
      const [indexes] = await c.query(
        `SELECT INDEX_NAME AS name, NON_UNIQUE AS nonUnique, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) AS cols
         FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'shape' GROUP BY INDEX_NAME, NON_UNIQUE`,
        [DATABASE],
      );
      return {
        columns: columns as { name: string; type: string; coll: string | null }[],
        indexes: indexes as { name: string; nonUnique: number; cols: string }[],
      };
    });
    const col = (n: string) => info.columns.find((c) => c.name === n);
    expect(col('next_run_at')?.type).toBe('datetime(3)');
    expect(col('lease_until')?.type).toBe('datetime(3)');
    expect(col('last_error')?.type).toBe('varchar(500)');
    expect(col('biz_key')?.coll).toMatch(/^utf8mb4_.*bin$/);
    // The result is kept as payload is: LONGTEXT in the table's utf8mb4.
    expect(col('result')?.type).toBe('longtext');
    expect(col('result')?.coll).toBe(col('payload')?.coll);
    // Progress: whole numbers up to 2^53 - 1 (MySQL 8 omits the display width).
    expect(col('progress_done')?.type).toMatch(/^bigint(\(20\))? unsigned$/);
    expect(col('progress_total')?.type).toMatch(/^bigint(\(20\))? unsigned$/);
    const idx = Object.fromEntries(info.indexes.map((i) => [i.cols, Number(i.nonUnique) === 0]));
    expect(idx['status,next_run_at,id']).toBe(false);
    expect(idx['claim_token']).toBe(false);
    expect(idx['type,biz_key']).toBe(false);
    expect(idx['type,active_key']).toBe(true);
  });

  it('keeps business keys that differ only in case or accents apart', async () => {
    const store = await openStore(db.url, { table: 'keys' });
    try {
      const submit = (bizKey: string) =>
        store.transaction((tx) =>
          store.insertIdempotent(tx, { type: 'k', payloadJson: '{}', maxRetry: 0, bizKey }),
        );
      const results = [];
      for (const key of ['Order-1', 'order-1', 'ordér-1', 'Order-1']) results.push(await submit(key));
      expect(results.map((r) => r.duplicate)).toEqual([false, false, false, true]);
      expect(results[3]?.id).toBe(results[0]?.id);
    } finally {
      await store.close();
    }
  });
});
