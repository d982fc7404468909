import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommandStore, SqlExecutor, TransactionOpener } from '@asynccmd/core';
import { PayloadTooLargeError, TransactionClosedError, UnknownCommandTypeError } from '@asynccmd/core';
import { createAsyncCommands, defineExecutor, defineTransactionalExecutor } from '@asynccmd/runtime';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMysqlStore } from '@asynccmd/adapter-mysql';
import { createPostgresStore } from '@asynccmd/adapter-postgres';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import pg from 'pg';

export const PG_URL = process.env.ASYNCCMD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const MYSQL_SERVER = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306';

export type Dialect = 'postgres' | 'mysql' | 'sqlite';

/**
 * Where one test file's tables live: a PostgreSQL schema, a MariaDB database or an SQLite file
 * of its own.
 */
export interface Place {
  readonly dialect: Dialect;
  /** PostgreSQL: the schema; MariaDB: the database; SQLite: the file's path. */
  readonly name: string;
  /**
   * A connection URL whose default schema/database is `name` (PostgreSQL: set search_path
   * yourself); SQLite: the file's path.
   */
  readonly url: string;
}

/** One ORM on one database, as the suite drives it. */
export interface OrmSubject<Trx> {
  /** The ORM's own transaction, run through the package's wrapper that reports the commit. */
  readonly transaction: <T>(fn: (trx: Trx) => Promise<T>) => Promise<T>;
  /** The package's one call that turns the ORM's transaction into what `client.submit` takes. */
  readonly executor: (trx: Trx) => SqlExecutor;
  /** A business write through the ORM, in `trx`. */
  readonly insertOrder: (trx: Trx, note: string) => Promise<void>;
  /** The package's opener for transactional executors, where it has one on this database. */
  readonly transactions?: TransactionOpener<Trx>;
  readonly close: () => Promise<void>;
}

/** A name no other test file, checkout or run uses. */
export function placeName(prefix: string): string {
  return `${prefix}_${process.pid}_${Date.now().toString(36)}`;
}

export async function createPlace(
  dialect: Dialect,
  name: string,
): Promise<Place & { drop: () => Promise<void> }> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), `${name}-`));
    const file = join(dir, 'app.db');
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT NOT NULL)');
    db.close();
    return {
      dialect,
      name: file,
      url: file,
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  if (dialect === 'postgres') {
    await pgAdmin(`CREATE SCHEMA "${name}"`);
    await pgAdmin(`CREATE TABLE "${name}".orders (id serial PRIMARY KEY, note text NOT NULL)`);
    return {
      dialect,
      name,
      url: PG_URL,
      drop: async () => void (await pgAdmin(`DROP SCHEMA IF EXISTS "${name}" CASCADE`)),
    };
  }
  await mysqlAdmin(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`);
  await mysqlAdmin(`CREATE TABLE \`${name}\`.orders (id INT AUTO_INCREMENT PRIMARY KEY, note TEXT NOT NULL)`);
  return {
    dialect,
    name,
    url: `${MYSQL_SERVER}/${name}`,
    drop: async () => void (await mysqlAdmin(`DROP DATABASE IF EXISTS \`${name}\``)),
  };
}

function gate(): { promise: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

async function pgAdmin(text: string, values: unknown[] = []): Promise<pg.QueryResultRow[]> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return (await client.query(text, values)).rows;
  } finally {
    await client.end();
  }
}

async function mysqlAdmin(text: string, values: unknown[] = []): Promise<Record<string, unknown>[]> {
  const conn = await mysql.createConnection(MYSQL_SERVER);
  try {
    const [rows] = await conn.query(text, values);
    return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : [];
  } finally {
    await conn.end();
  }
}

export async function ordersWith(place: Place, note: string): Promise<number> {
  if (place.dialect === 'sqlite') {
    const db = new Database(place.name, { readonly: true });
    try {
      return Number(db.prepare('SELECT count(*) FROM orders WHERE note = ?').pluck().get(note));
    } finally {
      db.close();
    }
  }
  const rows =
    place.dialect === 'postgres'
      ? await pgAdmin(`SELECT count(*)::int AS n FROM "${place.name}".orders WHERE note = $1`, [note])
      : await mysqlAdmin(`SELECT count(*) AS n FROM \`${place.name}\`.orders WHERE note = ?`, [note]);
  return Number(rows[0]?.n);
}

export function openStore(place: Place): CommandStore {
  if (place.dialect === 'sqlite') return createSqliteStore({ filename: place.name });
  return place.dialect === 'postgres'
    ? createPostgresStore({ connectionString: PG_URL, schema: place.name, poolConfig: { max: 4 } })
    : createMysqlStore({ connection: place.url, connectionLimit: 4 });
}

async function waitFor(what: string, condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/**
 * The ORM adapter's contract on one database: a business row and a command in one ORM transaction
 * commit together (and the IMMEDIATE command starts at commit), roll back together, and a bad
 * submit throws inside the transaction before anything is written.
 */
export function describeOrm<Trx>(
  title: string,
  dialect: Dialect,
  /** `store` is the runtime's: an ORM on SQLite may share its database handle. */
  open: (place: Place, store: CommandStore) => Promise<OrmSubject<Trx>>,
  /** The subject has `transactions`: transactional executors through the ORM are tested. */
  features: { readonly transactionalExecutors?: boolean } = {},
): void {
  describe(`${title} on ${dialect}`, () => {
    const ran: { orderNote: string; at: number }[] = [];
    const ship = defineExecutor<'orm.ship', { orderNote: string }>({
      type: 'orm.ship',
      mode: 'IMMEDIATE',
      execute: (p) => void ran.push({ orderNote: p.orderNote, at: performance.now() }),
    });
    let place: Place & { drop: () => Promise<void> };
    let store: CommandStore;
    let orm: OrmSubject<Trx>;
    /** A transactional executor through the ORM: one order row per attempt, one follow-up. */
    const holds = new Map<string, { started: boolean; release: Promise<void> }>();
    const kept: { tx: Trx | null } = { tx: null };
    const project = defineTransactionalExecutor<Trx>()<'orm.project', { note: string }>({
      type: 'orm.project',
      mode: 'IMMEDIATE',
      transactional: {
        kind: 'transaction-opener',
        transaction: (fn) => {
          if (orm.transactions === undefined) throw new Error(`${title} has no transaction opener here`);
          return orm.transactions.transaction(fn);
        },
      },
      async execute({ note }, ctx) {
        kept.tx = ctx.tx;
        await orm.insertOrder(ctx.tx, note);
        await ctx.submit('orm.ship', { orderNote: note });
        if (note.startsWith('workflow')) {
          await ctx.workflow(note).step('ship', 'orm.ship', { orderNote: note }).submit();
        }
        const hold = holds.get(note);
        if (hold !== undefined && !hold.started) {
          hold.started = true;
          await hold.release; // ignores its signal: returns only when let go
        }
        if (note.startsWith('throws')) throw new Error('business rule failed');
      },
    });
    // A poll interval far past the test timeout: only the after-commit dispatch can explain a run.
    let commands: ReturnType<typeof createAsyncCommands<readonly [typeof ship, typeof project]>>;

    beforeAll(async () => {
      place = await createPlace(dialect, placeName(`orm_${title.toLowerCase()}`));
      store = openStore(place);
      await store.migrate();
      orm = await open(place, store);
      commands = createAsyncCommands({
        store,
        // The ORM-transactional executor only where the subject has an opener (a SQLite store refuses it).
        executors: (features.transactionalExecutors === true ? [ship, project] : [ship]) as readonly [
          typeof ship,
          typeof project,
        ],
        pollIntervalMs: 600_000,
        maxPayloadBytes: 1024,
      });
      commands.start();
    });

    afterAll(async () => {
      await orm?.close();
      await commands?.stop({ timeoutMs: 2_000 });
      await place?.drop();
    });

    const ranFor = (note: string): number => ran.filter((r) => r.orderNote === note).length;

    it('commits the business row and the command together; the IMMEDIATE command starts at commit', async () => {
      const note = `commit-${dialect}`;
      let committedAt = 0;
      const id = await orm.transaction(async (trx) => {
        await orm.insertOrder(trx, note);
        const submitted = await commands.client.submit(orm.executor(trx), 'orm.ship', { orderNote: note });
        committedAt = performance.now();
        return submitted;
      });
      expect(id).toMatch(/^[1-9][0-9]*$/);
      await waitFor('the IMMEDIATE command to run', () => ranFor(note) === 1);
      expect(await ordersWith(place, note)).toBe(1);
      const record = await store.get(id);
      expect(record).toMatchObject({ id, type: 'orm.ship' });
      const viaOrm = (ran.find((r) => r.orderNote === note)?.at ?? 0) - committedAt;

      // The same through client.transaction, for comparison.
      const own = `own-${dialect}`;
      let ownCommittedAt = 0;
      await commands.client.transaction(async (_tx, submit) => {
        await submit('orm.ship', { orderNote: own });
        ownCommittedAt = performance.now();
      });
      await waitFor('the client.transaction command to run', () => ranFor(own) === 1);
      const viaClient = (ran.find((r) => r.orderNote === own)?.at ?? 0) - ownCommittedAt;
      console.log(
        `${title} on ${dialect}: IMMEDIATE start after the end of the transaction's callback (COMMIT included): ` +
          `${viaOrm.toFixed(1)} ms through the ORM, ${viaClient.toFixed(1)} ms through client.transaction`,
      );
    });

    it('submits with a priority and an ordering key through the ORM: kept, and run in key order', async () => {
      const note = `keyed-${dialect}`;
      const ids = await orm.transaction(async (trx) => {
        const first = await commands.client.submit(
          orm.executor(trx),
          'orm.ship',
          { orderNote: note },
          {
            orderingKey: note,
            priority: 3,
          },
        );
        const second = await commands.client.submit(
          orm.executor(trx),
          'orm.ship',
          { orderNote: note },
          {
            orderingKey: note,
          },
        );
        return [first, second];
      });
      for (let round = 0; round < 500; round++) {
        const statuses = await Promise.all(ids.map(async (id) => (await store.get(id))?.status));
        if (statuses.every((status) => status === 'SUCCESS')) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      const [first, second] = await Promise.all(ids.map((id) => store.get(id)));
      expect(first).toMatchObject({ orderingKey: note, priority: 3, status: 'SUCCESS' });
      expect(second).toMatchObject({ orderingKey: note, priority: 0, status: 'SUCCESS' });
      expect(BigInt(ids[1]!)).toBeGreaterThan(BigInt(ids[0]!));
      // The second ran only after the first (one at a time per key: see test/e2e/ordering-suite.ts).
      expect(ranFor(note)).toBe(2);
    });

    it('rolls back the business row and the command together; nothing runs', async () => {
      const note = `rollback-${dialect}`;
      let id = '';
      await expect(
        orm.transaction(async (trx) => {
          await orm.insertOrder(trx, note);
          id = await commands.client.submit(orm.executor(trx), 'orm.ship', { orderNote: note });
          throw new Error('business rule failed');
        }),
      ).rejects.toThrow('business rule failed');
      expect(id).not.toBe('');
      // Asked before the next submit: SQLite hands a rolled-back row's id out again.
      expect(await store.get(id)).toBeNull();
      // A later command runs; the rolled-back one, submitted before it, never does.
      const later = `after-rollback-${dialect}`;
      await orm.transaction(async (trx) => {
        await commands.client.submit(orm.executor(trx), 'orm.ship', { orderNote: later });
      });
      await waitFor('the later command to run', () => ranFor(later) === 1);
      await commands.runRound();
      expect(ranFor(note)).toBe(0);
      expect(await ordersWith(place, note)).toBe(0);
    });

    it('replacing idempotent submits (onPending) through the ORM: a PENDING command takes the contents, and a rollback undoes it', async () => {
      const bizKey = `debounce-${dialect}`;
      const submitOnce = (
        trx: Trx,
        orderNote: string,
        options: Parameters<typeof commands.client.submitIdempotent>[4],
      ) => commands.client.submitIdempotent(orm.executor(trx), 'orm.ship', bizKey, { orderNote }, options);
      // Due later: the IMMEDIATE dispatch at commit finds it not yet due, and it stays PENDING.
      const firstDue = new Date(Date.now() + 60_000);
      const first = await orm.transaction((trx) => submitOnce(trx, 'n1', { runAt: firstDue }));
      expect(first).toMatchObject({ duplicate: false, replaced: false });
      const pushed = new Date(Date.now() + 120_000);
      expect(
        await orm.transaction((trx) => submitOnce(trx, 'n2', { runAt: pushed, onPending: 'replace' })),
      ).toEqual({
        id: first.id,
        duplicate: true,
        replaced: true,
      });
      await expect(
        orm.transaction(async (trx) => {
          await submitOnce(trx, 'n3', { onPending: 'replace' });
          throw new Error('business rule failed');
        }),
      ).rejects.toThrow('business rule failed');
      const afterRollback = await store.get(first.id);
      expect(afterRollback?.payload).toEqual({ orderNote: 'n2' });
      expect(afterRollback?.nextRunAt.getTime()).toBe(pushed.getTime());
      expect(
        await orm.transaction((trx) =>
          submitOnce(trx, 'n4', { runAt: new Date(), onPending: 'replace-keep-run-at' }),
        ),
      ).toEqual({ id: first.id, duplicate: true, replaced: true });
      const kept = await store.get(first.id);
      expect(kept).toMatchObject({ status: 'PENDING', payload: { orderNote: 'n4' } });
      expect(kept?.nextRunAt.getTime()).toBe(pushed.getTime());
      expect((await store.list({ type: 'orm.ship', bizKey })).items).toHaveLength(1);
      await store.cancel(first.id);
    });

    if (features.transactionalExecutors === true) {
      const projectOnce = (note: string) =>
        commands.client.transaction((_tx, submit) => submit('orm.project', { note }));
      const statusOf = async (id: string) => (await store.get(id))?.status;
      const followUpsOf = async (note: string) =>
        (await store.list({ type: 'orm.ship' })).items.filter(
          (c) => (c.payload as { orderNote?: unknown }).orderNote === note,
        ).length;

      it("a transactional executor through the ORM: its row, its follow-up and the SUCCESS commit in the ORM's transaction; ctx.tx is closed after", async () => {
        const note = `tx-commit-${dialect}`;
        const id = await projectOnce(note);
        await waitFor('the follow-up to run', () => ranFor(note) === 1);
        expect(await statusOf(id)).toBe('SUCCESS');
        expect(await ordersWith(place, note)).toBe(1);
        expect(await followUpsOf(note)).toBe(1);
        // The ORM's transaction object the executor kept refuses a late write.
        const late = kept.tx;
        expect(late).not.toBeNull();
        await expect(orm.insertOrder(late!, `${note}-late`)).rejects.toBeInstanceOf(TransactionClosedError);
        expect(await ordersWith(place, `${note}-late`)).toBe(0);
      });

      it('a transactional executor through the ORM that throws: its row and its follow-up roll back, the retry is recorded', async () => {
        const note = `throws-${dialect}`;
        const id = await projectOnce(note);
        for (let round = 0; round < 500 && (await store.get(id))?.retryCount !== 1; round++) {
          await new Promise((r) => setTimeout(r, 20));
        }
        expect(await store.get(id)).toMatchObject({ status: 'PENDING', retryCount: 1 });
        expect(await ordersWith(place, note)).toBe(0);
        expect(await followUpsOf(note)).toBe(0);
        expect(ranFor(note)).toBe(0);
        await store.cancel(id);
      });

      it("ctx.workflow in the ORM's transaction is refused (a workflow needs the store's own handle): the attempt fails, nothing of it commits", async () => {
        const note = `workflow-${dialect}`;
        const id = await projectOnce(note);
        for (let round = 0; round < 500 && (await store.get(id))?.retryCount !== 1; round++) {
          await new Promise((r) => setTimeout(r, 20));
        }
        const failed = await store.get(id);
        expect(failed).toMatchObject({ status: 'PENDING', retryCount: 1 });
        expect(failed?.lastError).toMatch(/ctx\.workflow needs the store's own transaction/);
        expect(await ordersWith(place, note)).toBe(0);
        expect(await followUpsOf(note)).toBe(0);
        await store.cancel(id);
      });

      it('a claim requeued while the ORM-transactional executor waits: the stale attempt leaves no row and no follow-up; the next one commits once', async () => {
        const note = `tx-stale-${dialect}`;
        const release = gate();
        const hold = { started: false, release: release.promise };
        holds.set(note, hold);
        const id = await projectOnce(note);
        await waitFor('the first attempt waiting', () => hold.started);
        const admin = openStore(place);
        try {
          expect((await admin.requeue(id, new Date()))._tag).toBe('Right');
        } finally {
          await admin.close();
        }
        release.open();
        // The requeue's wake-up may start the next attempt here at once; otherwise one round does.
        for (let round = 0; round < 500 && (await statusOf(id)) !== 'SUCCESS'; round++) {
          if (round % 10 === 9) await commands.runRound();
          await new Promise((r) => setTimeout(r, 20));
        }
        await waitFor('the follow-up of the next attempt', () => ranFor(note) === 1);
        expect(await statusOf(id)).toBe('SUCCESS');
        // Both attempts wrote a row and submitted a follow-up: only the second's committed.
        expect(await ordersWith(place, note)).toBe(1);
        expect(await followUpsOf(note)).toBe(1);
        expect((await store.get(id))?.history.map((a) => a.outcome)).toContain('requeued');
      });
    }

    it('an unknown type or an oversize payload throws inside the transaction before anything is written', async () => {
      const note = `refused-${dialect}`;
      const before = (await store.list({})).items.length;
      await orm.transaction(async (trx) => {
        await orm.insertOrder(trx, note);
        const client = commands.client as unknown as {
          submit: (tx: SqlExecutor, type: string, payload: unknown) => Promise<string>;
        };
        await expect(client.submit(orm.executor(trx), 'orm.unknown', {})).rejects.toBeInstanceOf(
          UnknownCommandTypeError,
        );
        await expect(
          commands.client.submit(orm.executor(trx), 'orm.ship', { orderNote: 'x'.repeat(2048) }),
        ).rejects.toBeInstanceOf(PayloadTooLargeError);
        // The transaction goes on: nothing of the refused submits was written in it.
      });
      expect(await ordersWith(place, note)).toBe(1);
      expect((await store.list({})).items.length).toBe(before);
    });
  });
}
