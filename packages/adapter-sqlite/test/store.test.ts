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
import { COMMAND_TABLE_COLUMNS, runMigrations } from '@asynccmd/core/store-kit';
import { MIGRATIONS, sqliteMigrationEngine } from '../src/migrations.js';
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

/** Claims the due 'up.keyed' commands of `on` as keyed ones (the upgrade tests' claim). */
const claimUpKeyed = (on: SqliteCommandStore) =>
  on.claimDue({
    types: ['up.keyed'],
    keyedTypes: ['up.keyed'],
    limit: 10,
    now: new Date(Date.now() + 60_000),
    token: 't-up',
    leaseMs: 60_000,
  });

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

  /** Claims up to 10 due order.cancel commands under the token t1. */
  const claimT1 = (store: SqliteCommandStore) =>
    store.claimDue({
      types: ['order.cancel'],
      limit: 10,
      now: new Date(Date.now() + 1000),
      token: 't1',
      leaseMs: 60_000,
    });

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

  it('the history has every column of the command table, the list a move copies; a keyed command moves with its key', async () => {
    const store = await memoryStore();
    const columns = (table: string) =>
      (store.db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((c) => c.name);
    expect(columns('async_command')).toEqual([...COMMAND_TABLE_COLUMNS]);
    expect(columns('async_command_history')).toEqual([...COMMAND_TABLE_COLUMNS]);
    // The key triggers sit on the command table only: a history insert fires nothing.
    const triggers = store.db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'async_command_history'")
      .all();
    expect(triggers).toEqual([]);
    await store.keyLimits.declare([{ type: 'order.cancel', keyField: 'tenant', maxRunning: 5 }]);
    const [id] = await store.transaction((tx) =>
      store.insert(tx, [cmd({ payloadJson: '{"tenant":"acme"}' })]),
    );
    expect((await claimT1(store)).map((c) => c.id)).toEqual([id]);
    expect(await store.complete([{ id: id!, token: 't1' }])).toEqual([id]);
    expect(
      store.db.prepare('SELECT flow_key FROM async_command_history WHERE id = ?').pluck().get(BigInt(id!)),
    ).toBe('acme');
  });

  it('moves a succeeded command to the history table as it completes; one with dependants or a schedule tick stays', async () => {
    const store = await memoryStore();
    const ids = await store.transaction((tx) => store.insert(tx, [cmd(), cmd(), cmd(), cmd()]));
    store.db.prepare('UPDATE async_command SET has_dependants = 1 WHERE id = ?').run(BigInt(ids[1]!));
    store.db
      .prepare("UPDATE async_command SET schedule_name = 'tick', schedule_tick = 1 WHERE id = ?")
      .run(BigInt(ids[2]!));
    const claimed = await claimT1(store);
    expect(claimed.map((c) => c.id)).toEqual(ids);
    const before = await store.getMany(ids);
    const refs = ids.map((id) => ({ id, token: 't1' }));
    expect(await store.complete([...refs.slice(0, 2), { ...refs[2]!, resultJson: '{"r":1}' }])).toEqual(
      ids.slice(0, 3),
    );
    // The transactional completion (in the store's own transaction) moves it too.
    store.db.exec('BEGIN IMMEDIATE');
    expect(await store.transactionalCompletion.complete(store.db, refs[3]!)).toBe(true);
    store.db.exec('COMMIT');
    const place = (id: string): string =>
      store.db.prepare('SELECT 1 FROM async_command_history WHERE id = ?').get(BigInt(id)) === undefined
        ? 'command'
        : 'history';
    expect(ids.map(place)).toEqual(['history', 'command', 'command', 'history']);
    const after = await store.getMany(ids);
    const written = ['status', 'claimToken', 'leaseUntil', 'updatedAt', 'finishedAt', 'history', 'result'];
    const unchanged = (record: object): object =>
      Object.fromEntries(Object.entries(record).filter(([key]) => !written.includes(key)));
    expect(after.map(unchanged)).toEqual(before.map(unchanged));
    expect(after.map((r) => r.status)).toEqual(['SUCCESS', 'SUCCESS', 'SUCCESS', 'SUCCESS']);
    expect(after[2]?.result).toEqual({ r: 1 });
    // A retried complete whose first try landed answers as landed, from either table.
    expect(await store.complete(refs.slice(0, 2))).toEqual(ids.slice(0, 2));
    expect((await store.list({ limit: 10 })).items.map((r) => r.id)).toEqual([...ids].reverse());
  });

  it('submits, claims, completes on :memory:', async () => {
    const store = await memoryStore();
    const [id] = await store.transaction((tx) => store.insert(tx, [cmd()]));
    const claimed = await claimT1(store);
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

  it('an upgrade to the flow keys keys the unfinished commands already stored', async () => {
    const db = new Database(':memory:');
    try {
      const before = createSqliteStore({ database: db });
      await before.migrate();
      await before.keyLimits.declare([{ type: 'up.keyed', keyField: 'tenant', maxRunning: 1 }]);
      await before.transaction((tx) =>
        before.insert(tx, [
          cmd({ type: 'up.keyed', payloadJson: '{"tenant":"acme"}' }),
          cmd({ type: 'up.keyed', payloadJson: '{"tenant":"acme"}' }),
          cmd({ type: 'up.keyed', payloadJson: '{"tenant":"zeta"}' }),
        ]),
      );
      await before.close();
      // The table as the version before left it: no key table, triggers, index or column, the version unrecorded.
      const flowKeys = MIGRATIONS.find((m) => m.name === 'flow keys')!;
      db.exec(`DROP TRIGGER async_command_flow_key_insert; DROP TRIGGER async_command_flow_key_payload;
        DROP INDEX async_command_flow; ALTER TABLE async_command DROP COLUMN flow_key;
        DROP TABLE async_command_key_fields;
        DELETE FROM async_command_migrations WHERE version = ${flowKeys.version}`);
      const store = createSqliteStore({ database: db });
      open.push(store);
      await store.migrate();
      expect(db.prepare('SELECT flow_key FROM async_command ORDER BY id').pluck().all()).toEqual([
        'acme',
        'acme',
        'zeta',
      ]);
      const claimed = await claimUpKeyed(store);
      expect(claimed.map((c) => (c.payload as { tenant: string }).tenant).sort()).toEqual(['acme', 'zeta']);
    } finally {
      await Promise.all(open.splice(0).map((s) => s.close()));
      db.close();
    }
  });

  it('a database at version 18 migrates through the flow keys (19), then the history (20), in order', async () => {
    const db = new Database(':memory:');
    try {
      const inTransaction = async <T>(run: () => Promise<T>): Promise<T> => {
        db.exec('BEGIN IMMEDIATE');
        try {
          const result = await run();
          db.exec('COMMIT');
          return result;
        } catch (e) {
          db.exec('ROLLBACK');
          throw e;
        }
      };
      const engine = sqliteMigrationEngine(db, 'async_command', inTransaction);
      await runMigrations(
        engine,
        MIGRATIONS.filter((m) => m.version <= 18),
      );
      // What a store of version 18 left: a key limit, an unfinished keyed command, one finished in place.
      db.exec(`INSERT INTO async_command_key_limits (type, key_field, max_running) VALUES ('up.keyed', 'tenant', 1);
        INSERT INTO async_command (type, payload, max_retry, next_run_at, created_at, updated_at)
          VALUES ('up.keyed', '{"tenant":"acme"}', 3, 0, 1, 1);
        INSERT INTO async_command (type, payload, status, max_retry, next_run_at, created_at, updated_at, finished_at)
          VALUES ('up.keyed', '{"tenant":"zeta"}', 'SUCCESS', 3, 0, 1, 2, 2)`);
      const store = createSqliteStore({ database: db });
      open.push(store);
      await store.migrate();
      const versions = db
        .prepare('SELECT version, name FROM async_command_migrations WHERE version > 18 ORDER BY version')
        .all();
      expect(versions).toEqual([
        { version: 19, name: 'flow keys' },
        { version: 20, name: 'finished commands leave the command table' },
        { version: 21, name: 'submit windows' },
        { version: 22, name: 'key weights' },
        { version: 23, name: 'claims per type' },
      ]);
      const [pending, finished] = db
        .prepare('SELECT CAST(id AS TEXT) AS id, flow_key AS k FROM async_command ORDER BY id')
        .all() as { id: string; k: string | null }[];
      // Keyed by the flow keys' migration; the finished row stays where it is, unkeyed, and reads as before.
      expect(pending?.k).toBe('acme');
      expect(finished?.k).toBeNull();
      expect(await store.get(finished!.id)).toMatchObject({ status: 'SUCCESS', payload: { tenant: 'zeta' } });
      const claimed = await claimUpKeyed(store);
      expect(claimed.map((c) => c.id)).toEqual([pending!.id]);
      expect(await store.complete([{ id: pending!.id, token: 't-up' }])).toEqual([pending!.id]);
      expect(
        db
          .prepare('SELECT flow_key FROM async_command_history WHERE id = ?')
          .pluck()
          .get(BigInt(pending!.id)),
      ).toBe('acme');
      expect((await store.list({ type: 'up.keyed' })).items.map((r) => [r.id, r.status])).toEqual([
        [finished!.id, 'SUCCESS'],
        [pending!.id, 'SUCCESS'],
      ]);
    } finally {
      await Promise.all(open.splice(0).map((s) => s.close()));
      db.close();
    }
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
      type: 'a',
      limit: 1,
    });
    expect(claimPlan).toContain('async_command_claim_type');
    expect(claimPlan).not.toContain('TEMP B-TREE');
    // The rows a claim or an outcome write picks by id are found by id, not by walking a status.
    const byId = 'USING INTEGER PRIMARY KEY (rowid=?)';
    expect(claimPlan).toContain(byId);
    expect(claimPlan).not.toContain('status_created');
    for (const write of [
      'moveSucceeded',
      'dropMoved',
      'complete',
      'heartbeat',
      'release',
      'releaseRevoked',
    ] as const) {
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
    expect(plan(sql.purgeHistory, { olderThan: 1, statuses: '["SUCCESS"]', limit: 1 })).toContain(
      'async_command_history_finished',
    );
    const listByStatus = plan(
      sql.list({ status: true, statuses: false, type: false, bizKey: false, before: true, history: false }),
      { status: 'DEAD', beforeAt: 10, before: 10, limit: 51 },
    );
    expect(listByStatus).toContain('async_command_status_created');
    expect(listByStatus).not.toContain('TEMP B-TREE');
    expect(listByStatus).not.toContain('history');
    // Each table's page walks its own (created_at, id) index; only the two pages' rows are sorted.
    const listAll = plan(
      sql.list({ status: false, statuses: false, type: false, bizKey: false, before: true, history: true }),
      { beforeAt: 10, before: 10, limit: 51 },
    );
    expect(listAll).toContain('USING INDEX async_command_created');
    expect(listAll).toContain('USING INDEX async_command_history_created');
    expect(listAll.match(/TEMP B-TREE/g) ?? []).toHaveLength(1);
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

  it('a transaction that cannot take the write lock within the busy timeout fails SQLITE_BUSY, which transactional completion calls transient (a lock wait, not the attempt’s fault)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-busy-'));
    const other = new Database(join(dir, 'c.db'));
    try {
      const store = createSqliteStore({ filename: join(dir, 'c.db'), busyTimeoutMs: 100 });
      open.push(store);
      await store.migrate();
      other.exec('BEGIN IMMEDIATE');
      let ran = false;
      const error = await store.transaction(async () => void (ran = true)).catch((e: unknown) => e);
      other.exec('ROLLBACK');
      expect(ran).toBe(false);
      expect(error).toMatchObject({ code: 'SQLITE_BUSY' });
      expect(store.transactionalCompletion?.isTransient(error)).toBe(true);
      expect(store.transactionalCompletion?.isTransient(new Error('the executor failed'))).toBe(false);
    } finally {
      other.close();
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
