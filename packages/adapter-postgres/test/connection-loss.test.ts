import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ClaimRef, Logger } from '@asynccmd/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresCommandStore } from '../src/index.js';
import { tableNames } from '../src/names.js';
import { adminQuery, command, dropSchema, openStore, uniqueSchema } from './helpers.js';

const schema = uniqueSchema('acpg_loss');
const appName = `asynccmd_loss_${process.pid}`;
const warnings: string[] = [];
const logger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: (_obj, msg) => warnings.push(msg ?? ''),
  error: (_obj, msg) => warnings.push(msg ?? ''),
};
let store: PostgresCommandStore;

beforeAll(async () => {
  store = await openStore(schema, {
    poolConfig: { max: 4, application_name: appName },
    logger,
    listenReconnectMinMs: 20,
    listenReconnectMaxMs: 200,
  });
});

afterAll(async () => {
  await store?.close();
  await dropSchema(schema);
});

/** Kills every server backend of the store's pool and of its LISTEN connection. */
async function terminateStoreBackends(): Promise<number> {
  const rows = await adminQuery<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`,
    [appName],
  );
  await adminQuery('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [
    rows.map((r) => r.pid),
  ]);
  return rows.length;
}

/** Retries `op` until it works: after a kill, an operation in flight may fail once. */
async function persist<T>(op: () => Promise<T>, failures: { count: number }): Promise<T> {
  for (;;) {
    try {
      return await op();
    } catch {
      failures.count += 1;
      await sleep(10);
    }
  }
}

describe('PostgreSQL connection loss', () => {
  it('survives pg_terminate_backend mid-drain: draining resumes, nothing is lost, nothing stays RUNNING', async () => {
    const total = 1500;
    await store.transaction((tx) =>
      store.insert(
        tx,
        Array.from({ length: total }, (_, i) => command('drain', { i })),
      ),
    );
    const subscribed = await store.wakeups.subscribe(() => undefined);
    expect(store.wakeups.listening).toBe(true);

    const failures = { count: 0 };
    let completed = 0;
    const worker = async (): Promise<void> => {
      for (;;) {
        // Claims whose reply was lost with the connection stay RUNNING until their short lease
        // expires; the reclaim (on the database clock) gives them back.
        await persist(() => store.reclaimHung({ limit: 100, maxRescues: 1000 }), failures);
        const batch = await persist(
          () =>
            store.claimDue({
              types: ['drain'],
              limit: 10,
              now: new Date(),
              token: randomUUID(),
              leaseMs: 300,
            }),
          failures,
        );
        if (batch.length === 0) {
          const left = await persist(() => store.stats(new Date()), failures);
          if (
            !left.counts.some((r) => r.type === 'drain' && (r.status === 'PENDING' || r.status === 'RUNNING'))
          )
            return;
          await sleep(20);
          continue;
        }
        const refs: ClaimRef[] = batch.map((c) => ({ id: c.id, token: c.claimToken }));
        // Awaited before adding: `completed += await …` would read `completed` before the await.
        const done = await persist(() => store.complete(refs), failures);
        completed += done.length;
      }
    };
    const killer = async (): Promise<number> => {
      let killed = 0;
      for (const at of [200, 600, 1000]) {
        while (completed < at) await sleep(2);
        killed += await terminateStoreBackends();
      }
      return killed;
    };
    const [killed] = await Promise.all([killer(), worker(), worker()]);

    expect(killed).toBeGreaterThan(0);
    const counts = await adminQuery<{ status: string; n: string }>(
      `SELECT status, count(*) AS n FROM (SELECT type, status FROM "${schema}".async_command
         UNION ALL SELECT type, status FROM "${schema}".async_command_history) AS c
       WHERE type = 'drain' GROUP BY status`,
    );
    expect(counts).toEqual([{ status: 'SUCCESS', n: String(total) }]);
    // The pool dropped its dead idle clients through the 'error' handler instead of crashing.
    expect(warnings.some((w) => w.includes('connection lost'))).toBe(true);

    // The LISTEN connection comes back on its own, and wake-ups flow again.
    for (let i = 0; i < 500 && !store.wakeups.listening; i++) await sleep(10);
    expect(store.wakeups.listening).toBe(true);
    await subscribed();
  });

  it('a connection handed from one holder to the next keeps a listener: an error between them crashes nothing', async () => {
    // pg-pool hands a released client to a waiting connect() within the same tick and takes its
    // idle listener off; the next holder listens a tick later. A FATAL read in between (a server
    // going down) was an unheard 'error', which throws: it crashed a worker in a failover test.
    const first = await store.pool.connect();
    const held: (typeof first)[] = [first];
    for (let i = 1; i < 4; i++) held.push(await store.pool.connect()); // the pool's max: 4
    const waiting = store.pool.connect();
    first.release();
    expect(() =>
      first.emit('error', new Error('terminating connection due to unexpected postmaster exit')),
    ).not.toThrow();
    const next = await waiting;
    expect(next).toBe(first);
    next.release(true); // the connection is taken for lost: the pool drops it
    for (const c of held.slice(1)) c.release();
    // The store goes on with a fresh connection.
    expect(await store.now()).toBeInstanceOf(Date);
  });

  it('recovers after every connection of the store was killed while idle', async () => {
    let wakes = 0;
    const stop = await store.wakeups.subscribe(() => (wakes += 1));
    const claimNothing = () =>
      store.claimDue({ types: ['none'], limit: 1, now: new Date(), token: randomUUID(), leaseMs: 300 });
    // An idle connection in each of the store's pools: the durable one and the hot-path one.
    await store.ping();
    await claimNothing();
    expect(await terminateStoreBackends()).toBeGreaterThanOrEqual(3);
    await sleep(50);
    const failures = { count: 0 };
    await persist(() => store.ping(), failures);
    expect(failures.count).toBeLessThanOrEqual(1);
    const hotFailures = { count: 0 };
    expect(await persist(claimNothing, hotFailures)).toEqual([]);
    expect(hotFailures.count).toBeLessThanOrEqual(1);
    expect(await store.now()).toBeInstanceOf(Date);
    // Back on LISTEN: the subscriber was woken once for what it may have missed, and hears new notifies.
    for (let i = 0; i < 500 && !store.wakeups.listening; i++) await sleep(10);
    expect(store.wakeups.listening).toBe(true);
    const before = wakes;
    // Sent from outside the store: notify() would wake its own subscriber without the LISTEN.
    await adminQuery(`SELECT pg_notify($1, '')`, [tableNames(schema, 'async_command').channel]);
    for (let i = 0; i < 500 && wakes === before; i++) await sleep(10);
    expect(wakes).toBeGreaterThan(before);
    await stop();
  });

  it('a transaction whose connection dies before its COMMIT (with a NOTIFY and a claim riding on it) rejects cleanly', async () => {
    const token = randomUUID();
    let claimed: Promise<unknown> | null = null;
    let id: string | undefined;
    const attempt = store.transaction(async (tx) => {
      [id] = await store.insert(tx, [command('lost-at-commit')]);
      store.wakeups.notifyOnCommit(tx);
      claimed = store.claimByIdOnCommit(tx, {
        id: id!,
        now: new Date(Date.now() + 1000),
        token,
        leaseMs: 30_000,
      });
      const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await adminQuery('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
      await sleep(50);
    });
    await expect(attempt).rejects.toThrow();
    // Never committed: no row, nothing claimed, and the claim's promise settled (no unhandled rejection).
    await expect(claimed).resolves.toBeNull();
    expect(await store.get(id!)).toBeNull();
    // The broken client was not returned to the pool: the next transactions (with their rides) work.
    for (let i = 0; i < 5; i++) {
      const ride = await store.transaction(async (tx) => {
        const [next] = await store.insert(tx, [command('after-loss')]);
        return {
          id: next!,
          claimed: store.claimByIdOnCommit(tx, {
            id: next!,
            now: new Date(Date.now() + 1000),
            token,
            leaseMs: 30_000,
          }),
        };
      });
      await expect(ride.claimed).resolves.toMatchObject({ id: ride.id, status: 'RUNNING' });
    }
  });
});
