import { randomUUID } from 'node:crypto';
import { decideFailure, exponentialBackoff } from '@asynccmd/core';
import pg from 'pg';
import type { Pool } from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createPostgresStore } from '../src/index.js';
import type { PostgresCommandStore } from '../src/index.js';
import { command, DATABASE_URL, dropSchema, openStore, uniqueSchema } from './helpers.js';

const schema = uniqueSchema('acpg_durable');
let store: PostgresCommandStore;

beforeAll(async () => {
  store = await openStore(schema);
});

afterAll(async () => {
  await store?.close();
  await dropSchema(schema);
});

async function synchronousCommit(pool: Pool): Promise<string> {
  const { rows } = await pool.query<{ s: string }>(`SELECT current_setting('synchronous_commit') AS s`);
  return rows[0]!.s;
}

/** Counts the statements each of the store's pools runs while `fn` runs. */
async function poolsUsedBy(s: PostgresCommandStore, fn: () => Promise<unknown>): Promise<[number, number]> {
  const durable = vi.spyOn(s.pool, 'query');
  const hot = vi.spyOn(s.hotPool, 'query');
  try {
    await fn();
    return [durable.mock.calls.length, hot.mock.calls.length];
  } finally {
    durable.mockRestore();
    hot.mockRestore();
  }
}

const claimOne = (s: PostgresCommandStore, type: string) =>
  s.claimDue({
    types: [type],
    limit: 1,
    now: new Date(Date.now() + 1),
    token: randomUUID(),
    leaseMs: 30_000,
  });

describe('PostgreSQL durability of the store own writes', () => {
  it('runs claims, heartbeats and outcomes without waiting for the WAL flush (synchronous_commit off)', async () => {
    expect(store.hotPool).not.toBe(store.pool);
    expect(await synchronousCommit(store.hotPool)).toBe('off');
    const ids = await store.transaction((tx) =>
      store.insert(tx, [command('hot'), command('hot'), command('hot')]),
    );
    const [durable, hot] = await poolsUsedBy(store, async () => {
      const [a] = await claimOne(store, 'hot');
      const b = await store.claimById({
        id: ids[1]!,
        now: new Date(Date.now() + 1),
        token: randomUUID(),
        leaseMs: 30_000,
      });
      const [c] = await claimOne(store, 'hot');
      const refs = [a!, b!, c!].map((x) => ({ id: x.id, token: x.claimToken }));
      expect(await store.heartbeat(refs, 60_000)).toEqual(refs);
      expect(await store.complete([refs[0]!])).toEqual([refs[0]!.id]);
      expect(await store.release([refs[1]!])).toEqual([refs[1]!.id]);
      const outcome = decideFailure(c!, 'boom', new Date(), exponentialBackoff());
      expect(await store.fail([{ ref: refs[2]!, outcome }])).toEqual([refs[2]!.id]);
    });
    expect([durable, hot]).toEqual([0, 7]);
    const statuses = (await store.getMany(ids)).map((r) => r.status);
    expect(statuses).toEqual(['SUCCESS', 'PENDING', 'PENDING']);
  });

  it('keeps transaction(), admin transitions, reclaim, purge and migrations durable (synchronous_commit on)', async () => {
    expect(await synchronousCommit(store.pool)).toBe('on');
    const inTransaction = await store.transaction(async (tx) => {
      const { rows } = await tx.query<{ s: string }>(`SELECT current_setting('synchronous_commit') AS s`);
      return rows[0]!.s;
    });
    expect(inTransaction).toBe('on');
    const [id] = await store.transaction((tx) => store.insert(tx, [command('admin-durable')]));
    const [durable, hot] = await poolsUsedBy(store, async () => {
      await store.migrate();
      await store.reclaimHung({ limit: 10, maxRescues: 5 });
      await store.kill(id!, 'stop');
      await store.retry(id!, new Date());
      await store.requeue(id!, new Date());
      await store.cancel(id!, 'changed my mind');
      await store.purge({ olderThan: new Date(Date.now() + 60_000), limit: 10 });
    });
    expect(durable).toBeGreaterThanOrEqual(7);
    expect(hot).toBe(0);
  });

  it('keeps every write durable on one pool with durableClaims, and on a pool the application owns', async () => {
    const durableStore = createPostgresStore({
      connectionString: DATABASE_URL,
      poolConfig: { max: 1 },
      schema,
      durableClaims: true,
    });
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    const onPool = createPostgresStore({ pool, schema });
    try {
      for (const s of [durableStore, onPool]) {
        expect(s.hotPool).toBe(s.pool);
        expect(await synchronousCommit(s.hotPool)).toBe('on');
        await s.transaction((tx) => s.insert(tx, [command('durable-claim')]));
        expect(await claimOne(s, 'durable-claim')).toHaveLength(1);
        // The claim that rides on COMMIT shares this one connection with claimById (one pool of
        // one): both keep working, each under its own prepared name.
        for (let i = 0; i < 2; i++) {
          const token = randomUUID();
          const ride = await s.transaction(async (tx) => {
            const [id] = await s.insert(tx, [command('durable-ride')]);
            const claimed = s.claimByIdOnCommit(tx, {
              id: id!,
              now: new Date(Date.now() + 1000),
              token,
              leaseMs: 30_000,
            });
            return { claimed };
          });
          await expect(ride.claimed).resolves.toMatchObject({ status: 'RUNNING', claimToken: token });
          await s.transaction((tx) => s.insert(tx, [command('durable-claim')]));
          const [byId] = await s.transaction((tx) => s.insert(tx, [command('durable-by-id')]));
          await expect(
            s.claimById({ id: byId!, now: new Date(Date.now() + 1000), token, leaseMs: 30_000 }),
          ).resolves.toMatchObject({ status: 'RUNNING' });
          expect(await claimOne(s, 'durable-claim')).toHaveLength(1);
        }
      }
    } finally {
      await durableStore.close();
      await onPool.close();
    }
    expect(durableStore.pool.ended).toBe(true);
    expect(pool.ended).toBe(false);
    await pool.end();
  });

  it('prepares submit and hot-path statements once per connection, under names two stores on one pool never share', async () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    // No claims past a slow head: a first claim slowed by a loaded machine (its pick function
    // planned on first use) would prepare that claim's statement too, one more than counted here.
    const a = createPostgresStore({ pool, schema, slowHeadSkip: false });
    const b = createPostgresStore({ pool, schema, table: 'other_command', slowHeadSkip: false });
    try {
      await b.migrate();
      for (const s of [a, b, a, b]) {
        await s.transaction((tx) => s.insert(tx, [command('prepared')]));
        expect(await claimOne(s, 'prepared')).toHaveLength(1);
      }
      const { rows } = await pool.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_prepared_statements WHERE name LIKE 'asynccmd\\_%'`,
      );
      // Per store: the claim, and the single-row insert twice — with BEGIN (the first submit, before
      // any id was taken ahead) and with its id taken ahead (held back to the COMMIT). Shared by
      // both (the same text under the same name): the transactions' BEGIN and COMMIT.
      expect(rows[0]!.n).toBe('8');
    } finally {
      await a.close();
      await b.close();
      await pool.end();
    }
  });

  it('ends both of its own pools on close()', async () => {
    const own = createPostgresStore({ connectionString: DATABASE_URL, poolConfig: { max: 1 }, schema });
    expect(await claimOne(own, 'nothing-here')).toEqual([]);
    await own.close();
    expect([own.pool.ended, own.hotPool.ended]).toEqual([true, true]);
  });
});
