import { randomUUID } from 'node:crypto';
import { createConnection, type Connection } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PARTITION_LOCK_TIMEOUT_S } from '../src/history.js';
import type { MysqlCommandStore } from '../src/store.js';
import { freshDatabase, openStore, perProcess } from './databases.js';

/*
 * Finished commands leave the command table (migration 19): the store moves them, in batches, into
 * a history partitioned by finish time; every read finds a command wherever it is, and retention
 * drops whole partitions past its cutoff, deleting row by row only what they do not cover.
 */

const MINUTE = 60_000;
/** A cutoff nothing is older than: a purge with it only moves finished rows to the history. */
const LONG_AGO = new Date('2000-01-01T00:00:00Z');

let db: Awaited<ReturnType<typeof freshDatabase>>;
let store: MysqlCommandStore;
let conn: Connection;

beforeAll(async () => {
  db = await freshDatabase(perProcess('acmy_history'));
  store = await openStore(db.url);
  conn = await createConnection({
    uri: db.url,
    supportBigNumbers: true,
    bigNumberStrings: true,
    dateStrings: true,
  });
});

afterAll(async () => {
  await conn?.end();
  await store?.close();
  await db?.drop();
});

const command = (type: string) => ({ type, payloadJson: '{"n":1}', maxRetry: 0 });

async function submit(type: string, n = 1): Promise<string[]> {
  return store.transaction((tx) =>
    store.insert(
      tx,
      Array.from({ length: n }, () => command(type)),
    ),
  );
}

/** Claims every due command of `type`: their refs. */
async function claimAll(type: string, limit = 100) {
  return store.claimDue({
    types: [type],
    limit,
    now: new Date(Date.now() + 1000),
    token: randomUUID(),
    leaseMs: 60_000,
  });
}

/** Moves what finished into the history (a purge whose cutoff nothing passes). */
async function moveFinished(): Promise<void> {
  expect(await store.purge({ olderThan: LONG_AGO, statuses: ['SUCCESS'], limit: 1000 })).toBe(0);
}

async function placeOf(id: string): Promise<'command table' | 'history' | null> {
  const [rows] = await conn.query(
    `SELECT 'command table' AS place FROM async_command WHERE id = ? UNION ALL
     SELECT 'history' FROM async_command_history WHERE id = ?`,
    [id, id],
  );
  return ((rows as { place: 'command table' | 'history' }[])[0]?.place ?? null) as never;
}

/** The history's partitions but the catch-all, oldest first, with their upper bounds in ms. */
async function partitions(): Promise<{ name: string; upper: number; rows: number }[]> {
  const [rows] = await conn.query(
    `SELECT PARTITION_NAME AS name, PARTITION_DESCRIPTION AS bound FROM information_schema.PARTITIONS
      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'async_command_history' ORDER BY PARTITION_ORDINAL_POSITION`,
  );
  const out: { name: string; upper: number; rows: number }[] = [];
  for (const r of rows as { name: string; bound: string }[]) {
    if (r.name === 'pmax') continue;
    const [counted] = await conn.query(
      `SELECT COUNT(*) AS n FROM async_command_history PARTITION (${r.name})`,
    );
    out.push({
      name: r.name,
      upper: Date.parse(`${r.bound.replace(/'/g, '').replace(' ', 'T')}Z`),
      rows: Number((counted as { n: string }[])[0]?.n),
    });
  }
  return out;
}

describe('MySQL/MariaDB history', () => {
  it('a finished command moves to the history and reads the same from there', async () => {
    const ids = await submit('h.read', 3);
    const claimed = await claimAll('h.read');
    const [a, b, c] = claimed;
    expect(
      await store.complete([
        { id: a!.id, token: a!.claimToken, resultJson: '{"answer":42}' },
        { id: b!.id, token: b!.claimToken },
      ]),
    ).toEqual([a!.id, b!.id]);
    await store.fail([
      {
        ref: { id: c!.id, token: c!.claimToken },
        outcome: { status: 'DEAD', retryCount: 1, nextRunAt: new Date(), lastError: 'boom' },
      },
    ]);
    const before = {
      one: await store.get(a!.id),
      many: await store.getMany(ids),
      list: await store.list({ limit: 10, type: 'h.read' }),
      stats: (await store.stats(new Date())).counts.filter((r) => r.type === 'h.read'),
    };
    await moveFinished();
    expect(await placeOf(a!.id)).toBe('history');
    expect(await placeOf(b!.id)).toBe('history');
    // A dead letter stays: an admin retry starts from it.
    expect(await placeOf(c!.id)).toBe('command table');
    expect(await store.get(a!.id)).toEqual(before.one);
    expect(before.one).toMatchObject({ status: 'SUCCESS', result: { answer: 42 } });
    expect(await store.getMany(ids)).toEqual(before.many);
    expect(await store.list({ limit: 10, type: 'h.read' })).toEqual(before.list);
    expect(await store.list({ limit: 10, type: 'h.read', status: 'DEAD' })).toMatchObject({
      items: [{ id: c!.id }],
    });
    expect((await store.stats(new Date())).counts.filter((r) => r.type === 'h.read')).toEqual(before.stats);
    // A complete retried after its reply was lost still reports its own SUCCESS, from the history.
    expect(await store.complete([{ id: a!.id, token: a!.claimToken }])).toEqual([a!.id]);
    expect(await store.complete([{ id: a!.id, token: 'someone else' }])).toEqual([]);
    expect(await store.transactionalCompletion.succeededUnder({ id: b!.id, token: b!.claimToken })).toBe(
      true,
    );
    // An admin transition of a moved command is refused as of a SUCCESS, not as of a missing one.
    const killed = await store.kill(a!.id, 'late');
    expect(killed).toMatchObject({ _tag: 'Left', left: { code: 'ILLEGAL_TRANSITION', from: 'SUCCESS' } });
  });

  it('outcome counts read both tables', async () => {
    const from = new Date(Date.now() - MINUTE);
    await submit('h.outcomes', 4);
    const claimed = await claimAll('h.outcomes');
    await store.complete(claimed.slice(0, 2).map((c) => ({ id: c.id, token: c.claimToken })));
    await moveFinished();
    await store.complete(claimed.slice(2).map((c) => ({ id: c.id, token: c.claimToken })));
    const places = await Promise.all(claimed.map((c) => placeOf(c.id)));
    expect(places.slice(0, 2)).toEqual(['history', 'history']);
    const counts = await store.outcomeCounts({
      from,
      to: new Date(Date.now() + MINUTE),
      latencyBoundsMs: [],
    });
    expect(counts.find((r) => r.status === 'SUCCESS')?.count).toBeGreaterThanOrEqual(4);
  });

  it('a dependant of a command in the history starts at once and reads its result', async () => {
    const [dependency] = await submit('h.dep');
    const [claimed] = await claimAll('h.dep');
    await store.complete([{ id: claimed!.id, token: claimed!.claimToken, resultJson: '{"made":"x"}' }]);
    // The newest command stays in the command table (below): one more after it.
    const [newest] = await submit('h.dep.after');
    await moveFinished();
    expect(await placeOf(dependency!)).toBe('history');
    expect(await placeOf(newest!)).toBe('command table');
    const [dependant] = await store.transaction((tx) =>
      store.dependencies.insertWaiting(tx, [{ ...command('h.dependant'), dependsOn: [{ id: dependency! }] }]),
    );
    expect(await store.get(dependant!)).toMatchObject({ status: 'PENDING' });
    expect(await store.dependencies.dependenciesOf(dependant!)).toEqual([
      { id: dependency, type: 'h.dep', status: 'SUCCESS', onFailure: 'cancel', result: { made: 'x' } },
    ]);
  });

  it('the command with the highest id stays in the command table, so a restart never gives its id again', async () => {
    // A server whose AUTO_INCREMENT does not survive a restart starts again at MAX(id) + 1 of the
    // command table: every id moved to the history must stay below it.
    const ids = await submit('h.newest', 3);
    const claimed = await claimAll('h.newest');
    await store.complete(claimed.map((c) => ({ id: c.id, token: c.claimToken })));
    await moveFinished();
    expect(await Promise.all(ids.map((id) => placeOf(id)))).toEqual(['history', 'history', 'command table']);
    const [max] = await conn.query('SELECT MAX(id) AS id FROM async_command');
    expect(String((max as { id: string }[])[0]?.id)).toBe(ids[2]);
    // Once a newer command exists, it moves.
    await submit('h.newest.after');
    await moveFinished();
    expect(await placeOf(ids[2]!)).toBe('history');
  });

  it('an idempotency key frees up when its command finishes, wherever the row is', async () => {
    const submitKeyed = () =>
      store.transaction((tx) => store.insertIdempotent(tx, { ...command('h.key'), bizKey: 'k1' }));
    const first = await submitKeyed();
    expect((await submitKeyed()).duplicate).toBe(true);
    const [claimed] = await claimAll('h.key');
    await store.complete([{ id: claimed!.id, token: claimed!.claimToken }]);
    await moveFinished();
    const again = await submitKeyed();
    expect(again.duplicate).toBe(false);
    expect(again.id).not.toBe(first.id);
  });

  it('finished rows left in the command table (from before the history) move in batches, oldest first', async () => {
    const ids = await submit('h.upgrade', 2500);
    const [never] = await submit('h.upgrade.never');
    // As an older version finished them: SUCCESS in place.
    await conn.query(
      `UPDATE async_command SET status = 'SUCCESS', finished_at = UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE,
         started_at = UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE, claim_token = 'old'
       WHERE type = 'h.upgrade'`,
    );
    // A schedule's tick stays: its once-per-tick key holds for the life of the row.
    await conn.query(
      `UPDATE async_command SET status = 'SUCCESS', finished_at = UTC_TIMESTAMP(3) - INTERVAL 2 MINUTE,
         schedule_name = 'upgrade', schedule_tick = UTC_TIMESTAMP(3) WHERE id = ?`,
      [never],
    );
    const seen = await store.getMany(ids);
    const page = await store.list({ limit: 1000, type: 'h.upgrade' });
    await moveFinished();
    const [left] = await conn.query(`SELECT COUNT(*) AS n FROM async_command WHERE type = 'h.upgrade'`);
    expect(Number((left as { n: string }[])[0]?.n)).toBe(0);
    expect(await store.getMany(ids)).toEqual(seen);
    expect(seen).toHaveLength(ids.length);
    expect(await store.list({ limit: 1000, type: 'h.upgrade' })).toEqual(page);
    expect(await placeOf(never!)).toBe('command table');
    await conn.query('DELETE FROM async_command WHERE id = ?', [never]);
  });

  it('a purge makes partitions ahead of the clock, drops whole ones past the cutoff and deletes the rest row by row', async () => {
    const now = (await store.now()).getTime();
    // The purges above (a retention of decades: partitions a day wide) made partitions already;
    // a retention of 10 minutes (nothing old enough) keeps them, at least two hours ahead.
    expect(
      await store.purge({ olderThan: new Date(now - 10 * MINUTE), statuses: ['SUCCESS'], limit: 100_000 }),
    ).toBe(0);
    const made = await partitions();
    expect(made.length).toBeGreaterThanOrEqual(2);
    expect(made.at(-1)!.upper).toBeGreaterThanOrEqual(now + 120 * MINUTE);
    expect(made.every((p) => p.upper % (24 * 60 * MINUTE) === 0)).toBe(true);
    // Everything finished so far is in the first partition (it takes all before its upper bound).
    const [total] = await conn.query('SELECT COUNT(*) AS n FROM async_command_history');
    const historyRows = Number((total as { n: string }[])[0]?.n);
    expect(made[0]!.rows).toBe(historyRows);
    // One more finished now, in the partition of its finish time.
    const [late] = await submit('h.late');
    const [claimed] = await claimAll('h.late');
    await store.complete([{ id: claimed!.id, token: claimed!.claimToken }]);
    await moveFinished();
    // The edge of the dependant above, whose dependency finished in the first partition.
    const edges = async () =>
      Number(
        ((await conn.query('SELECT COUNT(*) AS n FROM async_command_dependencies'))[0] as { n: string }[])[0]
          ?.n,
      );
    expect(await edges()).toBe(1);
    // A cutoff past the first partition's end: it is dropped whole, what is left is deleted row by row.
    const cutoff = new Date(Math.max(made[0]!.upper, now) + 1);
    const purged = await store.purge({ olderThan: cutoff, statuses: ['SUCCESS'], limit: 100_000 });
    expect(purged).toBe(historyRows + 1);
    expect(await store.get(late!)).toBeNull();
    const after = await partitions();
    expect(after.map((p) => p.name)).not.toContain(made[0]!.name);
    expect(after.every((p) => p.upper > made[0]!.upper)).toBe(true);
    // The dropped partition took its commands' edges with it.
    expect(await edges()).toBe(0);
  });

  it('a retention of 10 minutes makes partitions 2 minutes wide, two hours ahead at most 24 widths', async () => {
    const other = await openStore(db.url, { table: 'narrow' });
    try {
      const now = (await other.now()).getTime();
      expect(
        await other.purge({ olderThan: new Date(now - 10 * MINUTE), statuses: ['SUCCESS'], limit: 10 }),
      ).toBe(0);
      const [rows] = await conn.query(
        `SELECT PARTITION_DESCRIPTION AS bound FROM information_schema.PARTITIONS
          WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'narrow_history' AND PARTITION_NAME <> 'pmax'
          ORDER BY PARTITION_ORDINAL_POSITION`,
      );
      const uppers = (rows as { bound: string }[]).map((r) =>
        Date.parse(`${r.bound.replace(/'/g, '').replace(' ', 'T')}Z`),
      );
      // The clock's partition and 24 more.
      expect(uppers).toHaveLength(25);
      expect(uppers.every((u, i) => i === 0 || u - uppers[i - 1]! === 2 * MINUTE)).toBe(true);
      expect(uppers[0]! - now).toBeLessThanOrEqual(2 * MINUTE);
    } finally {
      await other.close();
    }
  });

  it(`behind a transaction that read the history, a purge gives up its partition changes (after ${PARTITION_LOCK_TIMEOUT_S} s) and deletes row by row`, async () => {
    await submit('h.held', 3);
    const claimed = await claimAll('h.held');
    await store.complete(claimed.map((c) => ({ id: c.id, token: c.claimToken })));
    await moveFinished();
    const reader = await createConnection(db.url);
    try {
      await reader.query('START TRANSACTION');
      await reader.query('SELECT COUNT(*) FROM async_command_history');
      const before = await partitions();
      // A cutoff past the first partition: its drop must wait for the reader's metadata lock.
      const started = Date.now();
      const purged = await store.purge({
        olderThan: new Date(before[0]!.upper + 1),
        statuses: ['SUCCESS'],
        limit: 100_000,
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(PARTITION_LOCK_TIMEOUT_S * 1000);
      expect(Date.now() - started).toBeLessThan(30_000);
      expect(purged).toBeGreaterThanOrEqual(3);
      for (const c of claimed) expect(await store.get(c.id)).toBeNull();
      expect((await partitions()).map((p) => p.name)).toEqual(before.map((p) => p.name));
    } finally {
      await reader.query('ROLLBACK');
      await reader.end();
    }
  });

  it('two stores purging at once: one changes the partitions, neither fails, every row is purged once', async () => {
    const other = await openStore(db.url);
    try {
      await submit('h.two', 20);
      const claimed = await claimAll('h.two');
      await store.complete(claimed.map((c) => ({ id: c.id, token: c.claimToken })));
      const now = (await store.now()).getTime();
      const cutoff = new Date(now + 2 * MINUTE);
      const purged = await Promise.all([
        store.purge({ olderThan: cutoff, statuses: ['SUCCESS'], limit: 100_000 }),
        other.purge({ olderThan: cutoff, statuses: ['SUCCESS'], limit: 100_000 }),
      ]);
      expect(purged[0] + purged[1]).toBe(20);
      for (const c of claimed) expect(await store.get(c.id)).toBeNull();
    } finally {
      await other.close();
    }
  });
});
