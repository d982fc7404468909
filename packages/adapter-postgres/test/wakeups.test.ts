import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresStore } from '../src/index.js';
import { tableNames } from '../src/names.js';
import type { PostgresCommandStore } from '../src/index.js';
import { randomUUID } from 'node:crypto';
import { adminQuery, command, dropSchema, openStore, uniqueSchema } from './helpers.js';

const schema = uniqueSchema('acpg_wake');
let sender: PostgresCommandStore;
let receiver: PostgresCommandStore;

beforeAll(async () => {
  sender = await openStore(schema);
  receiver = await openStore(schema);
});

afterAll(async () => {
  await Promise.all([sender?.close(), receiver?.close()]);
  await dropSchema(schema);
});

/** Resolves on the next wake-up of `store`; the subscription ends with it. */
async function nextWake(store: PostgresCommandStore): Promise<void> {
  let wake!: () => void;
  const woken = new Promise<void>((resolve) => (wake = resolve));
  const stop = await store.wakeups.subscribe(() => wake());
  try {
    await woken;
  } finally {
    await stop();
  }
}

/** The backend pid of the one LISTEN connection on this file's table, found by the statement it last ran. */
async function listenerPid(): Promise<number> {
  const { channel } = tableNames(schema, 'async_command');
  const rows = await adminQuery<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE query = $1`, [
    `LISTEN "${channel}"`,
  ]);
  expect(rows).toHaveLength(1);
  return rows[0]!.pid;
}

/** Returns once `store`, already subscribed, has received a notification sent by `sender`. */
async function notified(store: PostgresCommandStore): Promise<void> {
  const woken = nextWake(store); // subscribes before notify() below runs
  sender.wakeups.notify();
  await woken;
}

describe('PostgreSQL wake-ups', () => {
  it('says so in its capabilities', () => {
    expect(sender.capabilities).toMatchObject({
      skipLocked: true,
      wakeups: true,
      revocations: true,
      sqlExecutor: true,
    });
    expect(sender.capabilities.commitRiding).not.toBeNull();
  });

  it('delivers a notify from one store to a subscriber of another on the same table', async () => {
    let wake!: () => void;
    const woken = new Promise<void>((resolve) => (wake = resolve));
    // subscribe() resolves once LISTEN runs: a NOTIFY sent after that is heard.
    const stop = await receiver.wakeups.subscribe(() => wake());
    try {
      sender.wakeups.notify();
      await woken;
    } finally {
      await stop();
    }
    expect(receiver.wakeups.listening).toBe(false);
  });

  it('wakes its own subscribers at once and is not woken again by its own NOTIFY, which other stores hear', async () => {
    let own = 0;
    let other = 0;
    const stopOwn = await sender.wakeups.subscribe(() => (own += 1));
    const stopOther = await receiver.wakeups.subscribe(() => (other += 1));
    try {
      await sleep(150); // let earlier windows close
      sender.wakeups.notify();
      expect(own).toBe(1); // synchronously, before any NOTIFY could come back
      for (let i = 0; i < 400 && other === 0; i++) await sleep(5);
      expect(other).toBe(1);
      // The sender's LISTEN connection got the same NOTIFY before the other store did or about
      // then (one server, one commit); a NOTIFY sent after it, from outside, proves its LISTEN
      // connection delivers, and that its own one was skipped.
      await adminQuery(`SELECT pg_notify($1, '')`, [tableNames(schema, 'async_command').channel]);
      for (let i = 0; i < 400 && (own < 2 || other < 2); i++) await sleep(5);
      await sleep(50); // anything else on its way arrives meanwhile
      expect(own).toBe(2);
      expect(other).toBe(2);
    } finally {
      await Promise.all([stopOwn(), stopOther()]);
    }
  });

  it('coalesces a burst of notifies into at most one NOTIFY per window', async () => {
    let wakes = 0;
    const stop = await receiver.wakeups.subscribe(() => (wakes += 1));
    try {
      for (let i = 0; i < 1000; i++) sender.wakeups.notify();
      // A burst in one tick: one NOTIFY at once, one more at the end of the window.
      for (let i = 0; i < 200 && wakes < 2; i++) await sleep(5);
      await sleep(100);
      expect(wakes).toBeGreaterThanOrEqual(1);
      expect(wakes).toBeLessThanOrEqual(2);
      // After a quiet window the next notify goes out at once again.
      const before = wakes;
      sender.wakeups.notify();
      for (let i = 0; i < 200 && wakes === before; i++) await sleep(5);
      expect(wakes).toBe(before + 1);
    } finally {
      await stop();
    }
  });

  it('sends its NOTIFY on its own connection, outside any caller transaction', async () => {
    let wakes = 0;
    const stop = await receiver.wakeups.subscribe(() => (wakes += 1));
    try {
      await sleep(150); // let earlier windows close
      // Delivered while the caller's transaction is still open: the NOTIFY did not join it.
      await sender.transaction(async (tx) => {
        await sender.insert(tx, [command('inside')]);
        sender.wakeups.notify();
        for (let i = 0; i < 400 && wakes === 0; i++) await sleep(5);
        expect(wakes).toBe(1);
      });
    } finally {
      await stop();
    }
  });

  it('sends the wake-up of a store transaction with its COMMIT, in the same round trip', async () => {
    let wakes = 0;
    const stop = await receiver.wakeups.subscribe(() => (wakes += 1));
    try {
      await sleep(150); // let earlier windows close
      let ids: string[] = [];
      await sender.transaction(async (tx) => {
        ids = await sender.insert(tx, [command('announced')]);
        expect(sender.wakeups.notifyOnCommit(tx)).toBe(true);
        await sleep(50);
        expect(wakes).toBe(0); // not before the commit
      });
      for (let i = 0; i < 200 && wakes === 0; i++) await sleep(5);
      expect(wakes).toBe(1);
      // The row was committed before the NOTIFY went out: a woken claimer finds it.
      expect((await receiver.get(ids[0]!))?.status).toBe('PENDING');
      await sleep(100);
      expect(wakes).toBe(1); // and only one NOTIFY went out
    } finally {
      await stop();
    }
  });

  it('sends nothing for a transaction that rolls back, and refuses clients it did not open', async () => {
    let wakes = 0;
    const stop = await receiver.wakeups.subscribe(() => (wakes += 1));
    try {
      await sleep(150);
      await expect(
        sender.transaction(async (tx) => {
          await sender.insert(tx, [command('rolled-back')]);
          sender.wakeups.notifyOnCommit(tx);
          throw new Error('business failure');
        }),
      ).rejects.toThrow('business failure');
      // A client of the application's own (not a store transaction): the caller must notify().
      const own = await sender.pool.connect();
      try {
        expect(sender.wakeups.notifyOnCommit(own)).toBe(false);
      } finally {
        own.release();
      }
      await sleep(150);
      expect(wakes).toBe(0);
    } finally {
      await stop();
    }
  });

  it('folds the commit announcements of a burst of transactions into the window', async () => {
    let wakes = 0;
    const stop = await receiver.wakeups.subscribe(() => (wakes += 1));
    try {
      await sleep(150);
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          sender.transaction(async (tx) => {
            await sender.insert(tx, [command(`burst-${i}`)]);
            sender.wakeups.notifyOnCommit(tx);
          }),
        ),
      );
      await sleep(150);
      // One with the first commit, then at most one per 5 ms window while the burst lasted.
      expect(wakes).toBeGreaterThanOrEqual(1);
      expect(wakes).toBeLessThan(20);
    } finally {
      await stop();
    }
  });

  it('keeps tables apart: another table has another channel', async () => {
    const other = await openStore(schema, { table: 'other_command' });
    let wakes = 0;
    const stop = await receiver.wakeups.subscribe(() => (wakes += 1));
    try {
      other.wakeups.notify();
      await sleep(150);
      expect(wakes).toBe(0);
      sender.wakeups.notify();
      for (let i = 0; i < 200 && wakes === 0; i++) await sleep(5);
      expect(wakes).toBe(1);
    } finally {
      await stop();
      await other.close();
    }
  });

  it('stops listening when the last subscriber leaves, and a subscriber that throws harms no one', async () => {
    let good = 0;
    const stopBad = await receiver.wakeups.subscribe(() => {
      throw new Error('subscriber bug');
    });
    const stopGood = await receiver.wakeups.subscribe(() => (good += 1));
    sender.wakeups.notify();
    for (let i = 0; i < 200 && good === 0; i++) await sleep(5);
    expect(good).toBe(1);
    await stopBad();
    expect(receiver.wakeups.listening).toBe(true);
    await stopGood();
    expect(receiver.wakeups.listening).toBe(false);
  });

  it('runs the claim that follows a notification on the LISTEN connection, other claims on the pool', async () => {
    let woken = 0;
    const stop = await receiver.wakeups.subscribe(() => (woken += 1));
    try {
      const listener = await listenerPid();
      const lastQuery = async (): Promise<string | undefined> =>
        (
          await adminQuery<{ query: string }>('SELECT query FROM pg_stat_activity WHERE pid = $1', [listener])
        )[0]?.query;
      await sender.transaction((tx) =>
        sender.insert(tx, [command('lend.a'), command('lend.a'), command('lend.a')]),
      );
      const claim = (): Promise<unknown[]> =>
        receiver.claimDue({
          types: ['lend.a'],
          limit: 1,
          now: new Date(),
          token: randomUUID(),
          leaseMs: 60_000,
        });
      // No notification yet: a poll's claim runs on the pool.
      expect(await claim()).toHaveLength(1);
      expect(await lastQuery()).toMatch(/^LISTEN /);
      sender.wakeups.notify();
      for (let i = 0; i < 200 && woken === 0; i++) await sleep(5);
      expect(woken).toBe(1);
      // Two claims at once after it: one on the LISTEN connection, the other on the pool.
      const [first, second] = await Promise.all([claim(), claim()]);
      expect(first).toHaveLength(1);
      expect(second).toHaveLength(1);
      expect(first).not.toEqual(second);
      expect(await lastQuery()).toContain('async_command_claim_due');
      // Lent once per notification; and notifications still arrive on it afterwards.
      expect(receiver.wakeups.lendAfterWake(async () => 'again')).toBeNull();
      sender.wakeups.notify();
      for (let i = 0; i < 200 && woken === 1; i++) await sleep(5);
      expect(woken).toBe(2);
    } finally {
      await stop();
    }
  });

  it('gives the LISTEN connection the hot path session: no WAL flush wait unless claims are durable', async () => {
    const durable = await openStore(schema, { durableClaims: true });
    const setting = async (store: PostgresCommandStore): Promise<unknown> => {
      const stop = await store.wakeups.subscribe(() => undefined);
      try {
        await notified(store);
        const lent = store.wakeups.lendAfterWake((c) =>
          c.query<{ synchronous_commit: string }>('SHOW synchronous_commit'),
        );
        expect(lent).not.toBeNull();
        return (await lent)?.rows[0]?.synchronous_commit;
      } finally {
        await stop();
      }
    };
    try {
      expect(await setting(receiver)).toBe('off');
      expect(await setting(durable)).toBe('on');
    } finally {
      await durable.close();
    }
  });

  it('ends the LISTEN connection only once a statement lent to it is over', async () => {
    const stop = await receiver.wakeups.subscribe(() => undefined);
    await notified(receiver);
    const slow = receiver.wakeups.lendAfterWake((c) => c.query('SELECT pg_sleep(0.2)'));
    expect(slow).not.toBeNull();
    await stop(); // the last subscriber leaves while the statement runs
    await expect(slow).resolves.toBeDefined();
    expect(receiver.wakeups.listening).toBe(false);
    expect(receiver.wakeups.lendAfterWake(async () => 'unused')).toBeNull(); // not listening
  });

  it('subscribes without a reachable server (polling covers the gap) and closes promptly', async () => {
    const nowhere = createPostgresStore({
      connectionString: 'postgres://postgres@127.0.0.1:1/test',
      listenReconnectMinMs: 10,
      listenReconnectMaxMs: 50,
    });
    const stop = await nowhere.wakeups.subscribe(() => undefined);
    expect(nowhere.wakeups.listening).toBe(false);
    nowhere.wakeups.notify(); // fails quietly
    await sleep(100); // a few reconnect attempts
    await stop();
    await nowhere.close();
  });
});
