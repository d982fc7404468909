import type { ClaimRef, OnPending } from '@asynccmd/core';
import { createConnection } from 'mysql2/promise';
import type { Connection } from 'mysql2/promise';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { MysqlCommandStore } from '../src/store.js';
import { admin, freshDatabase, openStore, perProcess } from './databases.js';

const DATABASE = perProcess('asynccmd_mysql_active_key_locks');

/**
 * What an idempotent submit in a caller's transaction does to the outcome write of the key's
 * holder (docs/databases.md). A submit that meets a holder's active_key entry share-locks it,
 * record and the gap before it, to the end of the caller's transaction; an outcome write changes
 * that entry (the key goes NULL, a delete-mark and a new entry in uq_active_key). Each case is
 * built with real connections, the interleaving fixed by lock waits the server reports.
 */
describe('idempotent submits and outcome writes on the active key', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let store: MysqlCommandStore;
  const opened: Connection[] = [];

  beforeAll(async () => {
    db = await freshDatabase(DATABASE);
    store = await openStore(db.url);
    await admin(async (c) => {
      await c.query(
        `CREATE TABLE \`${DATABASE}\`.business (id BIGINT AUTO_INCREMENT PRIMARY KEY, note TEXT)`,
      );
    });
  });
  afterEach(async () => {
    for (const c of opened.splice(0)) await c.end().catch(() => undefined);
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  /** A connection of the caller's (mysql2 defaults, the server's default isolation), in this file's database. */
  async function connection(): Promise<Connection> {
    const c = await createConnection(db.url);
    opened.push(c);
    return c;
  }

  /** Idempotent commands of `type` with these keys, in order (ascending ids), claimed under one token. */
  async function runningHolders(type: string, keys: readonly string[]): Promise<ClaimRef[]> {
    const ids: string[] = [];
    for (const bizKey of keys) {
      const r = await store.transaction((tx) =>
        store.insertIdempotent(tx, { type, bizKey, payloadJson: '{}', maxRetry: 0 }),
      );
      ids.push(r.id);
    }
    const token = `${type}-token`;
    const claimed = await store.claimDue({
      types: [type],
      limit: keys.length,
      now: new Date(Date.now() + 1000),
      token,
      leaseMs: 60_000,
    });
    expect(claimed.map((c) => c.id).sort()).toEqual([...ids].sort());
    return ids.map((id) => ({ id, token }));
  }

  /** The statements of this database's transactions now waiting for a row lock, by their first word. */
  async function waiting(): Promise<string[]> {
    return admin(async (c) => {
      const [rows] = await c.query(
        `SELECT t.trx_query AS query FROM information_schema.INNODB_TRX t
         JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
         WHERE t.trx_state = 'LOCK WAIT' AND p.DB = ?`,
        [DATABASE],
      );
      return (rows as { query: string | null }[])
        .map((r) => (r.query ?? '').trim().split(/\s+/)[0]?.toUpperCase() ?? '')
        .sort();
    });
  }

  /**
   * Polls until exactly these statements (first words) wait for a lock. The server refreshes what
   * INNODB_TRX shows only when nobody read it for 0.1 s, so reads come further apart than that.
   */
  async function untilWaiting(expected: readonly string[]): Promise<void> {
    const want = [...expected].sort();
    for (;;) {
      await new Promise((r) => setTimeout(r, 150));
      if ((await waiting()).join() === want.join()) return;
    }
  }

  /** Settles to 'pending' while `p` has not settled yet (checked after the current macrotask). */
  async function state(p: Promise<unknown>): Promise<'pending' | 'settled'> {
    const marker = Symbol('pending');
    const first = await Promise.race([
      p.then(
        () => 'settled' as const,
        () => 'settled' as const,
      ),
      new Promise<typeof marker>((r) => setImmediate(() => r(marker))),
    ]);
    return first === marker ? 'pending' : first;
  }

  async function statusOf(id: string): Promise<string | undefined> {
    return (await store.get(id))?.status;
  }

  /**
   * Holders k1 and k2 of `type` (k1 the type's smallest key, k2 a larger id) completed in one
   * batch that stops between its two rows: a blocker holds k2's row, so k1's is written (its
   * active_key entry delete-marked, uncommitted) and the batch waits. Returns the caller's
   * connection too.
   */
  async function halfWrittenBatch(type: string) {
    const [first, second] = await runningHolders(type, ['k1', 'k2']);
    const blocker = await connection();
    const caller = await connection();
    await blocker.query('START TRANSACTION');
    await blocker.query('SELECT id FROM async_command WHERE id = ? FOR UPDATE', [second?.id]);
    const completing = store.complete([first as ClaimRef, second as ClaimRef]);
    await untilWaiting(['UPDATE']);
    return { first, second, blocker, caller, completing };
  }

  it("a 'keep' submit that waits on a holder an outcome batch has just written meets a deadlock with the batch's next row of the type: the batch, the lighter transaction, is rolled back and written again after the caller's COMMIT", async () => {
    // k1 is the type's smallest key, and the batch's next row (k2, a larger id) the type's last
    // finished one: its new (type, NULL, id) entry lands in the gap before k1's entry.
    const { first, second, blocker, caller, completing } = await halfWrittenBatch('deadlock');
    // The caller's submit meets k1's entry, delete-marked by the uncommitted batch: it waits for
    // a share lock on it and the gap before it.
    await caller.query('START TRANSACTION');
    await caller.query("INSERT INTO business (note) VALUES ('order 1')");
    const submitting = store.insertIdempotent(caller, {
      type: 'deadlock',
      bizKey: 'k1',
      payloadJson: '{}',
      maxRetry: 0,
    });
    await untilWaiting(['INSERT', 'UPDATE']);
    // Let go: the batch reaches k2 and inserts its NULL entry into that gap, behind the caller's
    // waiting request, which waits on the batch: a cycle. The caller's transaction holds more (its
    // business row, and the share lock its insert's look-up of the type's key field takes under
    // REPEATABLE READ), so InnoDB rolls the batch back: k1 is RUNNING again, the caller's submit a
    // duplicate of it.
    await blocker.query('ROLLBACK');
    expect(await submitting).toEqual({ id: first?.id, duplicate: true, replaced: false });
    // The duplicate's share lock holds the batch, tried again, until the caller's COMMIT.
    expect(await state(completing)).toBe('pending');
    await caller.query('COMMIT');
    expect(await completing).toEqual([first?.id, second?.id]);
    expect([await statusOf(first!.id), await statusOf(second!.id)]).toEqual(['SUCCESS', 'SUCCESS']);
    const [rows] = await caller.query('SELECT COUNT(*) AS n FROM business');
    expect(Number((rows as { n: number }[])[0]?.n)).toBe(1);
  }, 30_000);

  it.each(['replace', 'replace-keep-run-at'] as const)(
    "a '%s' submit in the same interleaving waits for the batch and then inserts: it writes the holder by primary key, as the batch does",
    async (onPending: OnPending) => {
      const type = `ordered-${onPending}`;
      const { first, second, blocker, caller, completing } = await halfWrittenBatch(type);
      await caller.query('START TRANSACTION');
      await caller.query("INSERT INTO business (note) VALUES ('order 2')");
      const submitting = store.insertIdempotent(
        caller,
        { type, bizKey: 'k1', payloadJson: '{"v":2}', maxRetry: 0 },
        { onPending },
      );
      await untilWaiting(['UPDATE', 'UPDATE']);
      await blocker.query('ROLLBACK');
      expect(await completing).toEqual([first?.id, second?.id]);
      const submitted = await submitting;
      await caller.query('COMMIT');
      expect(submitted).toMatchObject({ duplicate: false, replaced: false });
      expect(submitted.id).not.toBe(first?.id);
    },
    30_000,
  );

  /** An idempotent submit of (`type`, `bizKey`) in a caller's transaction left open. */
  async function submitInOpenTransaction(type: string, bizKey: string, onPending?: OnPending) {
    const caller = await connection();
    await caller.query('START TRANSACTION');
    const payloadJson = onPending === undefined ? '{}' : '{"v":2}';
    const result = await store.insertIdempotent(
      caller,
      { type, bizKey, payloadJson, maxRetry: 0 },
      onPending === undefined ? undefined : { onPending },
    );
    return { caller, result };
  }

  it("a 'keep' duplicate holds the holder's outcome write, and the batch it is in, until the caller's transaction ends", async () => {
    const [before, holder] = await runningHolders('stall-own', ['a', 'k']);
    const { caller, result: duplicate } = await submitInOpenTransaction('stall-own', 'k');
    expect(duplicate).toEqual({ id: holder?.id, duplicate: true, replaced: false });
    const completing = store.complete([before as ClaimRef, holder as ClaimRef]);
    await untilWaiting(['UPDATE']);
    // The caller goes on with its business; the batch waits for it, the row before too.
    await caller.query("INSERT INTO business (note) VALUES ('order 3')");
    expect(await waiting()).toEqual(['UPDATE']);
    expect(await state(completing)).toBe('pending');
    expect(await statusOf(before?.id as string)).toBe('RUNNING');
    await caller.query('COMMIT');
    expect(await completing).toEqual([before?.id, holder?.id]);
  }, 30_000);

  it("a 'replace' submit that finds the holder RUNNING holds its outcome write likewise (the row it left alone stays locked)", async () => {
    const [holder] = await runningHolders('stall-replace', ['k']);
    const { caller, result: left } = await submitInOpenTransaction('stall-replace', 'k', 'replace');
    expect(left).toEqual({ id: holder?.id, duplicate: true, replaced: false });
    const completing = store.complete([holder as ClaimRef]);
    await untilWaiting(['UPDATE']);
    expect(await state(completing)).toBe('pending');
    await caller.query('COMMIT');
    expect(await completing).toEqual([holder?.id]);
  }, 30_000);

  it("a 'keep' duplicate of the type's smallest key holds another command's outcome write too, through the gap before that key", async () => {
    // The finishing command (key 'z', the smaller id) is the type's last: its NULL entry goes
    // just before the smallest key's entry, whose gap the duplicate locked.
    const [other] = await runningHolders('stall-gap', ['z']);
    const pending = await store.transaction((tx) =>
      store.insertIdempotent(tx, { type: 'stall-gap', bizKey: 'a', payloadJson: '{}', maxRetry: 0 }),
    );
    const { caller, result: duplicate } = await submitInOpenTransaction('stall-gap', 'a');
    expect(duplicate).toEqual({ id: pending.id, duplicate: true, replaced: false });
    const completing = store.complete([other as ClaimRef]);
    await untilWaiting(['UPDATE']);
    expect(await state(completing)).toBe('pending');
    await caller.query('COMMIT');
    expect(await completing).toEqual([other?.id]);
    expect(await statusOf(pending.id)).toBe('PENDING');
  }, 30_000);
});
