import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresCommandStore } from '../src/index.js';
import { tableNames } from '../src/names.js';
import { adminQuery, command, DATABASE_URL, dropSchema, openStore, uniqueSchema } from './helpers.js';

const claimOf = (store: PostgresCommandStore, type: string) =>
  store.claimDue({
    types: [type],
    limit: 10,
    now: new Date(Date.now() + 60_000),
    token: randomUUID(),
    leaseMs: 60_000,
  });

/** Polls pg_stat_activity until a backend waits on an advisory lock running `like`, or gives up. */
async function waitingOnAdvisoryLock(like: string): Promise<boolean> {
  for (let i = 0; i < 500; i++) {
    const rows = await adminQuery<{ n: string }>(
      `SELECT count(*)::text AS n FROM pg_stat_activity
       WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE $1`,
      [like],
    );
    if (Number(rows[0]?.n) > 0) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return false;
}

/**
 * Ordering keys under concurrency: the check of a claim sees earlier commands of a key that
 * another claimer has locked, and keyed submits of one key take their ids in commit order.
 */
describe('ordering keys under locks (PostgreSQL)', () => {
  const schema = uniqueSchema('acpg_ordlock');
  let store: PostgresCommandStore;
  let holder: pg.Client;

  beforeAll(async () => {
    store = await openStore(schema);
    holder = new pg.Client({ connectionString: DATABASE_URL });
    await holder.connect();
  });
  afterAll(async () => {
    await holder?.end();
    await store?.close();
    await dropSchema(schema);
  });

  it('a head of key locked by another claimer is skipped, and the rest of its key waits', async () => {
    const type = 'locked.head';
    const [head, next] = await store.transaction((tx) =>
      store.insert(tx, [command(type, {}, { orderingKey: 'k' }), command(type, {}, { orderingKey: 'k' })]),
    );
    await holder.query('BEGIN');
    await holder.query(`SELECT id FROM "${schema}".async_command WHERE id = $1 FOR UPDATE`, [head]);
    try {
      expect(await claimOf(store, type)).toEqual([]);
    } finally {
      await holder.query('ROLLBACK');
    }
    expect((await claimOf(store, type)).map((c) => c.id)).toEqual([head]);
    expect((await store.get(next!))?.status).toBe('PENDING');
  });

  it('a keyed submit waits for an uncommitted submit of the same key, so ids follow commit order', async () => {
    const type = 'lock.order';
    const keyed = (extra = {}) => command(type, {}, { orderingKey: 'slot', ...extra });
    const first = await store.transaction(async (tx) => {
      const [id] = await store.insert(tx, [keyed()]);
      const second = store.transaction((other) => store.insert(other, [keyed(), keyed()]));
      const once = store.transaction((other) =>
        store.insertIdempotent(other, { ...keyed(), bizKey: 'once' }),
      );
      let done = false;
      void Promise.all([second, once]).then(() => (done = true));
      expect(await waitingOnAdvisoryLock('%WITH locked AS%')).toBe(true);
      expect(done).toBe(false);
      return { id: id!, second, once };
    });
    const later = [...(await first.second), (await first.once).id];
    for (const id of later) expect(BigInt(id)).toBeGreaterThan(BigInt(first.id));
  });

  it('the SQL submit takes the same lock', async () => {
    const type = 'lock.sql';
    const submit = `"${schema}".async_command_submit`;
    await holder.query('BEGIN');
    const [mine] = await store.transaction((tx) =>
      store.insert(tx, [command(type, {}, { orderingKey: 'sql' })]),
    );
    try {
      const table = tableNames(schema, 'async_command').table;
      await holder.query(`SELECT pg_advisory_xact_lock(hashtext($1), hashtext('sql'))`, [table]);
      const viaSql = adminQuery<{ id: string }>(`SELECT ${submit}($1, '{}', ordering_key => 'sql') AS id`, [
        type,
      ]);
      expect(await waitingOnAdvisoryLock(`%${submit}%`)).toBe(true);
      await holder.query('COMMIT');
      const [row] = await viaSql;
      expect(BigInt(row!.id)).toBeGreaterThan(BigInt(mine!));
      expect((await store.get(row!.id))?.orderingKey).toBe('sql');
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
    }
  });
});
