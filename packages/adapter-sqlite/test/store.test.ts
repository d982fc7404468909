import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import * as E from 'fp-ts/lib/Either.js';
import { isAsyncCommandError } from '@asynccmd/core';
import type { AsyncCommandError, NewCommand } from '@asynccmd/core';
import type { SqliteCommandStore } from '@asynccmd/adapter-sqlite';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { sqliteSql } from '../src/sql.js';

const cmd = (over: Partial<NewCommand> = {}): NewCommand => ({
  type: 'order.cancel',
  payloadJson: '{"orderId":1}',
  maxRetry: 3,
  ...over,
});

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return isAsyncCommandError(e) ? (e as AsyncCommandError).code : `other: ${String(e)}`;
  }
  return undefined;
}

describe('SqliteCommandStore (adapter specifics)', () => {
  const open: SqliteCommandStore[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });

  async function memoryStore() {
    const store = createSqliteStore({ filename: ':memory:' });
    open.push(store);
    await store.migrate();
    return store;
  }

  it('refuses a hostile table name with a typed error, before touching the database', () => {
    expect(codeOf(() => createSqliteStore({ filename: ':memory:', table: 'x; DROP TABLE y' }))).toBe(
      'INVALID_IDENTIFIER',
    );
    expect(codeOf(() => createSqliteStore({ filename: ':memory:', table: 'a"b' }))).toBe(
      'INVALID_IDENTIFIER',
    );
  });

  it('needs exactly one of filename and database', () => {
    expect(codeOf(() => createSqliteStore({}))).toBe('INVALID_ARGUMENT');
  });

  it('submits, claims, completes on :memory:', async () => {
    const store = await memoryStore();
    const [id] = await store.transaction((tx) => store.insert(tx, [cmd()]));
    const claimed = await store.claimDue({
      types: ['order.cancel'],
      limit: 10,
      now: new Date(Date.now() + 1000),
      token: 't1',
      leaseMs: 60_000,
    });
    expect(claimed.map((c) => c.id)).toEqual([id]);
    expect(claimed[0]?.payload).toEqual({ orderId: 1 });
    expect(await store.complete([{ id: id!, token: 't1' }])).toEqual([id]);
    expect((await store.get(id!))?.status).toBe('SUCCESS');
  });

  it('reports a transaction that was rolled back before its COMMIT as TransactionRolledBackError', async () => {
    const store = createSqliteStore({ filename: ':memory:' });
    open.push(store);
    await store.migrate();
    const attempt = store.transaction(async (tx) => {
      await store.insert(tx, [cmd({ type: 'rolled.back' })]);
      tx.exec('ROLLBACK'); // as SQLite does by itself on SQLITE_FULL or an I/O error
      return 'looked fine';
    });
    await expect(attempt).rejects.toMatchObject({ code: 'TRANSACTION_ROLLED_BACK' });
    expect((await store.list({ type: 'rolled.back' })).items).toEqual([]);
    await expect(store.transaction((tx) => store.insert(tx, [cmd()]))).resolves.toHaveLength(1);
  });

  it('refuses payloads that are too large or not JSON, and loses nothing else', async () => {
    const store = createSqliteStore({ filename: ':memory:', maxPayloadBytes: 16 });
    open.push(store);
    await store.migrate();
    await expect(
      store.insert(store.db, [cmd({ payloadJson: JSON.stringify('x'.repeat(20)) })]),
    ).rejects.toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
    });
    await expect(store.insert(store.db, [cmd({ payloadJson: '{oops' })])).rejects.toMatchObject({
      code: 'PAYLOAD_NOT_SERIALISABLE',
    });
    expect((await store.list({})).items).toHaveLength(0);
  });

  it('refuses bad ids with InvalidCommandIdError', async () => {
    const store = await memoryStore();
    await expect(store.get('abc')).rejects.toMatchObject({ code: 'INVALID_ID' });
    await expect(store.kill('0')).rejects.toMatchObject({ code: 'INVALID_ID' });
    await expect(store.complete([{ id: '1 OR 1=1', token: 'x' }])).rejects.toMatchObject({
      code: 'INVALID_ID',
    });
  });

  it('shares a caller-owned handle without closing it, and its operations wait for an open transaction', async () => {
    const db = new Database(':memory:');
    const store = createSqliteStore({ database: db });
    await store.migrate();
    let inserted: string | undefined;
    const tx = store.transaction(async (h) => {
      [inserted] = await store.insert(h, [cmd()]);
      await new Promise((r) => setTimeout(r, 20));
      throw new Error('business rollback');
    });
    // Started while the transaction is open: must not run inside it (it would be rolled back too).
    const listing = store.list({});
    await expect(tx).rejects.toThrow('business rollback');
    expect((await listing).items).toHaveLength(0);
    expect(inserted).toMatch(/^[1-9][0-9]*$/);
    expect(await store.get(inserted as string)).toBeNull();
    await store.close();
    expect(db.open).toBe(true);
    db.close();
  });

  it('an admin transition from the wrong state is a typed Left', async () => {
    const store = await memoryStore();
    const [id] = await store.insert(store.db, [cmd()]);
    const r = await store.retry(id!, new Date());
    expect(E.isLeft(r) && r.left.code).toBe('ILLEGAL_TRANSITION');
    const missing = await store.kill('999');
    expect(E.isLeft(missing) && missing.left.code).toBe('NOT_FOUND');
  });

  it('opens a file with WAL, a busy timeout of at least 5 s and synchronous=NORMAL', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-pragmas-'));
    try {
      const store = createSqliteStore({ filename: join(dir, 'c.db') });
      open.push(store);
      expect(store.db.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(store.db.pragma('busy_timeout', { simple: true })).toBeGreaterThanOrEqual(5000);
      expect(store.db.pragma('synchronous', { simple: true })).toBe(1);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("submits inside the caller's own synchronous better-sqlite3 transaction: rollback leaves no row", async () => {
    const db = new Database(':memory:');
    const store = createSqliteStore({ database: db });
    await store.migrate();
    const rollback = db.transaction(() => {
      // insert runs its statement synchronously, so it joins the caller's transaction.
      void store.insert(db, [cmd()]);
      void store.insertIdempotent(db, { ...cmd(), bizKey: 'k' });
      throw new Error('rolled back');
    });
    expect(() => rollback()).toThrow('rolled back');
    expect((await store.list({})).items).toHaveLength(0);
    const commit = db.transaction(() => void store.insert(db, [cmd()]));
    commit();
    expect((await store.list({})).items).toHaveLength(1);
    await store.close();
    db.close();
  });

  it('a claim reads its rows by position exactly as the other reads name them', async () => {
    const store = await memoryStore();
    const ids = await store.transaction((tx) =>
      store.insert(tx, [cmd(), cmd({ bizKey: 'k', headers: { a: 'b' }, maxRetry: 7 })]),
    );
    const claim = { types: ['order.cancel'], leaseMs: 1000, now: new Date(Date.now() + 1000), instance: 'w' };
    const [first] = await store.claimDue({ ...claim, limit: 1, token: 't1' });
    const second = await store.claimById({ ...claim, id: ids[1]!, token: 't2' });
    expect(first).toEqual(await store.get(ids[0]!));
    expect(second).toEqual(await store.get(ids[1]!));
    expect(second).toMatchObject({ bizKey: 'k', maxRetry: 7, claimToken: 't2', status: 'RUNNING' });
  });

  it('a claim returns text with quotes, escapes and any Unicode, and a failed attempt, exactly as get does', async () => {
    const store = await memoryStore();
    const awkward = 'q"uo\\te \u0001\n\t tab 😀 é \u2028';
    const [id] = await store.transaction((tx) =>
      store.insert(tx, [
        cmd({
          bizKey: awkward,
          owner: awkward,
          orderingKey: awkward,
          headers: { [awkward]: awkward },
          payloadJson: JSON.stringify({ text: awkward }),
          priority: 3,
        }),
      ]),
    );
    const claim = { types: ['order.cancel'], leaseMs: 1000, instance: awkward, limit: 1 };
    const [first] = await store.claimDue({ ...claim, now: new Date(Date.now() + 1000), token: awkward });
    expect(first).toEqual(await store.get(id!));
    expect(first).toMatchObject({ bizKey: awkward, claimedBy: awkward, claimToken: awkward });
    const retryAt = new Date(Date.now() - 1);
    await store.fail([
      {
        ref: { id: id!, token: awkward },
        outcome: { status: 'PENDING', retryCount: 1, nextRunAt: retryAt, lastError: awkward },
      },
    ]);
    const [again] = await store.claimDue({ ...claim, now: new Date(Date.now() + 1000), token: 't2' });
    expect(again).toEqual(await store.get(id!));
    expect(again).toMatchObject({ lastError: awkward, retryCount: 1, history: [{ error: awkward }] });
  });

  it('the hot paths use their indexes, never a sort of all due rows', async () => {
    const store = await memoryStore();
    const sql = sqliteSql('async_command');
    const plan = (text: string, params: object) =>
      (store.db.prepare(`EXPLAIN QUERY PLAN ${text}`).all(params) as { detail: string }[])
        .map((r) => r.detail)
        .join('; ');
    const claimPlan = plan(sql.claimDue, {
      token: 't',
      instance: 'worker',
      leaseMs: 1,
      now: 1,
      types: '["a"]',
      limit: 1,
    });
    expect(claimPlan).toContain('async_command_claim');
    expect(claimPlan).not.toContain('TEMP B-TREE');
    // The rows a claim or an outcome write picks by id are found by id, not by walking a status.
    const byId = 'USING INTEGER PRIMARY KEY (rowid=?)';
    expect(claimPlan).toContain(byId);
    expect(claimPlan).not.toContain('status_created');
    for (const write of ['complete', 'heartbeat', 'release', 'releaseRevoked'] as const) {
      const writePlan = plan(sql[write], write === 'heartbeat' ? { refs: '[]', leaseMs: 1 } : { refs: '[]' });
      expect(writePlan, write).toContain(byId);
      expect(writePlan, write).not.toContain('status_created');
    }
    const failPlan = plan(sql.fail, { attempts: '[]' });
    expect(failPlan).toContain(byId);
    expect(failPlan).not.toContain('status_created');
    expect(plan(sql.reclaimHung, { maxRescues: 1, deadError: 'x', limit: 1 })).toContain(
      'async_command_lease',
    );
    expect(plan(sql.purge, { olderThan: 1, statuses: '["SUCCESS"]', limit: 1 })).toContain(
      'async_command_finished',
    );
    const listByStatus = plan(
      sql.list({ status: true, statuses: false, type: false, bizKey: false, before: true }),
      { status: 'DEAD', beforeAt: 10, before: 10, limit: 51 },
    );
    expect(listByStatus).toContain('async_command_status_created');
    expect(listByStatus).not.toContain('TEMP B-TREE');
    const listAll = plan(
      sql.list({ status: false, statuses: false, type: false, bizKey: false, before: true }),
      { beforeAt: 10, before: 10, limit: 51 },
    );
    expect(listAll).toContain('async_command_created');
    expect(listAll).not.toContain('TEMP B-TREE');
  });

  it('a transaction blocked by a transaction of another store in this process waits without blocking the event loop', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-inproc-'));
    try {
      const a = createSqliteStore({ filename: join(dir, 'c.db') });
      const b = createSqliteStore({ filename: join(dir, 'c.db') });
      open.push(a, b);
      await a.migrate();
      let bDone = false;
      const aTx = a.transaction(async (tx) => {
        await a.insert(tx, [cmd()]);
        // b's transaction must wait for the lock asynchronously, or this timer could never fire.
        await new Promise((r) => setTimeout(r, 30));
        expect(bDone).toBe(false);
      });
      const bTx = b.transaction((tx) => b.insert(tx, [cmd()])).then(() => (bDone = true));
      await Promise.all([aTx, bTx]);
      expect((await a.list({})).items).toHaveLength(2);
    } finally {
      await Promise.all(open.splice(0).map((s) => s.close()));
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a claim blocked by a transaction of another connection in this process (an ORM’s) waits without blocking the event loop', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-orm-lock-'));
    const orm = new Database(join(dir, 'c.db'));
    try {
      const store = createSqliteStore({ filename: join(dir, 'c.db') });
      open.push(store);
      await store.migrate();
      await store.transaction((tx) => store.insert(tx, [cmd({ type: 'due' })]));
      // The other connection's open write transaction, as an ORM's that spans awaits.
      orm.exec('BEGIN IMMEDIATE');
      let claimed: unknown = null;
      const claim = store
        .claimDue({ types: ['due'], limit: 1, now: new Date(Date.now() + 1000), token: 't', leaseMs: 1000 })
        .then((rows) => (claimed = rows));
      // The claim must wait for the lock asynchronously, or this timer could not fire before it settles.
      await new Promise((r) => setTimeout(r, 30));
      expect(claimed).toBeNull();
      orm.exec('COMMIT');
      await claim;
      expect(claimed).toHaveLength(1);
    } finally {
      orm.close();
      await Promise.all(open.splice(0).map((s) => s.close()));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
