import { createMysqlStore, type MysqlCommandStore } from '@asynccmd/adapter-mysql';
import { createPostgresStore, type PostgresCommandStore } from '@asynccmd/adapter-postgres';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import type { CommandStore, Logger } from '@asynccmd/core';
import { checkHealth, createAsyncCommands, defineExecutor, publicHealthReport } from '@asynccmd/runtime';
import { createMetrics } from '@asynccmd/runtime/metrics';
import { createConnection } from 'mysql2/promise';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * A long transaction elsewhere (an analytics query holding a snapshot) keeps the database from
 * cleaning up the command table's dead rows, and a queue slows down while it lasts. The store
 * says who holds it; health warns, metrics show it, and an instance that claims logs it.
 */
const PG_SERVER = (process.env.ASYNCCMD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test').replace(
  /\/[^/]*$/,
  '',
);
const MYSQL_SERVER = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306';
const HELD_MS = 1_200;

interface Held {
  /** What the database's description of the holder contains. */
  readonly mark: string;
  release(): Promise<void>;
}

interface Database {
  readonly name: string;
  open(): Promise<CommandStore>;
  /** Deletes `count` rows of the command table on a session of its own; resolves once it committed. */
  deleteRows?(count: number): Promise<void>;
  /** Opens a session of another "application" that holds a snapshot until released. */
  holdSnapshot(): Promise<Held>;
  /**
   * Whether the probe may name an older holder than the test's own: MySQL's transactions are the
   * whole server's, and other test files share it.
   */
  readonly serverWide: boolean;
  dispose(): Promise<void>;
}

function recordingLogger(): { logger: Logger; lines: { level: string; msg: string }[] } {
  const lines: { level: string; msg: string }[] = [];
  const at =
    (level: string) =>
    (a: unknown, b?: unknown): void =>
      void lines.push({ level, msg: String(typeof a === 'string' ? a : b) });
  return { logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }, lines };
}

async function postgres(): Promise<Database> {
  // A database of its own: PostgreSQL's horizon for a table counts the sessions of its database
  // only, so other test files' sessions cannot be the oldest.
  const name = `cleanup_${process.pid}_${Math.floor(Math.random() * 1e6)}`;
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: `${PG_SERVER}/postgres` });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE DATABASE "${name}"`);
  const url = `${PG_SERVER}/${name}`;
  const stores: PostgresCommandStore[] = [];
  return {
    name: 'postgres',
    serverWide: false,
    async open() {
      const store = createPostgresStore({ connection: url });
      stores.push(store);
      await store.migrate();
      return store;
    },
    async deleteRows(count) {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        await c.query(
          `INSERT INTO public.async_command (type, payload, status, max_retry, next_run_at, created_at, updated_at)
           SELECT 'cleanup.rows', '{}', 'SUCCESS', 0, now(), now(), now() FROM generate_series(1, $1)`,
          [count],
        );
        await c.query(`DELETE FROM public.async_command WHERE type = 'cleanup.rows'`);
        // A backend sends its table statistics at a transaction's end at most once a second.
        await c.query('SELECT pg_stat_force_next_flush()');
        await c.query('SELECT 1');
      } finally {
        await c.end();
      }
    },
    async holdSnapshot() {
      const c = new pg.Client({ connectionString: url, application_name: 'analytics-query' });
      await c.connect();
      await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await c.query('SELECT count(*) FROM pg_class');
      return {
        mark: "application 'analytics-query'",
        release: async () => {
          await c.query('ROLLBACK');
          await c.end();
        },
      };
    },
    async dispose() {
      await Promise.all(stores.map((s) => s.close()));
      await admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    },
  };
}

async function mysql(): Promise<Database> {
  const name = `cleanup_${process.pid}_${Math.floor(Math.random() * 1e6)}`;
  const admin = await createConnection(MYSQL_SERVER);
  await admin.query(`CREATE DATABASE \`${name}\``);
  const stores: MysqlCommandStore[] = [];
  return {
    name: 'mysql',
    serverWide: true,
    async open() {
      const store = createMysqlStore({ connection: `${MYSQL_SERVER}/${name}` });
      stores.push(store);
      await store.migrate();
      return store;
    },
    async holdSnapshot() {
      const c = await createConnection(`${MYSQL_SERVER}/${name}`);
      const [[row]] = (await c.query('SELECT CONNECTION_ID() AS id')) as unknown as [[{ id: number }]];
      await c.query('START TRANSACTION WITH CONSISTENT SNAPSHOT');
      return {
        mark: `thread ${row.id}`,
        release: async () => {
          await c.query('ROLLBACK');
          await c.end();
        },
      };
    },
    async dispose() {
      await Promise.all(stores.map((s) => s.close()));
      await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await admin.end();
    },
  };
}

for (const make of [postgres, mysql]) {
  describe(`what holds back the database's cleanup, on ${make.name}`, () => {
    let db: Database;
    let store: CommandStore;

    beforeAll(async () => {
      db = await make();
      store = await db.open();
    }, 30_000);

    afterAll(async () => {
      await db?.dispose();
    }, 30_000);

    it('the store names the session holding a snapshot, and for how long', async () => {
      const held = await db.holdSnapshot();
      try {
        await sleep(HELD_MS);
        const horizon = await store.cleanupHorizon!.read();
        expect(horizon.oldest).not.toBeNull();
        expect(horizon.oldest!.kind).toBe('transaction');
        expect(horizon.oldest!.heldForMs).toBeGreaterThanOrEqual(HELD_MS - 100);
        if (!db.serverWide || horizon.oldest!.description.includes(held.mark)) {
          expect(horizon.oldest!.description).toContain(held.mark);
        }
        expect(typeof horizon.deadRows).toBe('number');
      } finally {
        await held.release();
      }
    });

    // PostgreSQL counts dead tuples per table; InnoDB's history length is the whole server's.
    if (make === postgres)
      it('dead rows of the command table are counted', async () => {
        const before = (await store.cleanupHorizon!.read()).deadRows ?? 0;
        await db.deleteRows!(50);
        const deadline = Date.now() + 15_000;
        let dead = before;
        while (dead < before + 50 && Date.now() < deadline) {
          dead = (await store.cleanupHorizon!.read()).deadRows ?? 0;
          if (dead < before + 50) await sleep(100);
        }
        expect(dead).toBeGreaterThanOrEqual(before + 50);
      }, 20_000);

    it('health warns (never DOWN) past maxCleanupHoldMs, and the public report leaves out who', async () => {
      const held = await db.holdSnapshot();
      try {
        await sleep(HELD_MS);
        const report = await checkHealth(store, { maxCleanupHoldMs: 500 });
        expect(report.status).toBe('UP');
        expect(report.checks.cleanupHeldForMs).toBeGreaterThanOrEqual(HELD_MS - 100);
        expect(report.warnings.map((w) => w.code)).toEqual(['CLEANUP_HELD']);
        expect(report.warnings[0]!.message).toMatch(/kept the database from cleaning up finished commands/);
        expect(report.warnings[0]!.detail).toBeTruthy();
        const pub = publicHealthReport(report);
        expect(pub.warnings[0]).toEqual({ code: 'CLEANUP_HELD', message: report.warnings[0]!.message });
        const off = await checkHealth(store, { maxCleanupHoldMs: null });
        expect(off.warnings).toEqual([]);
        expect(off.checks.cleanupHeldForMs).toBeNull();
      } finally {
        await held.release();
      }
    });

    it('metrics show how long cleanup has been held', async () => {
      const held = await db.holdSnapshot();
      try {
        await sleep(HELD_MS);
        const metrics = createMetrics({ store });
        const text = await metrics.metrics();
        const seconds = Number(/^asynccmd_cleanup_held_seconds (\S+)$/m.exec(text)?.[1]);
        expect(seconds).toBeGreaterThanOrEqual((HELD_MS - 100) / 1000);
        expect(text).toMatch(/^asynccmd_dead_rows \d+$/m);
      } finally {
        await held.release();
      }
    });

    it('an instance that claims logs a warning naming the holder once, and a line when it ends', async () => {
      const { logger, lines } = recordingLogger();
      const runtime = createAsyncCommands({
        store,
        logger,
        cleanupWatch: { intervalMs: 100, warnAfterMs: 500 },
        executors: [defineExecutor({ type: 'cleanup.noop', mode: 'ASYNC_POOL', execute: () => undefined })],
      });
      runtime.start();
      const held = await db.holdSnapshot();
      let released = false;
      try {
        const deadline = Date.now() + 10_000;
        const warned = () => lines.filter((l) => l.level === 'warn' && /cleaning up/.test(l.msg));
        while (warned().length === 0 && Date.now() < deadline) await sleep(50);
        expect(warned()).toHaveLength(1);
        if (!db.serverWide) expect(warned()[0]!.msg).toContain(held.mark);
        await sleep(400);
        expect(warned(), 'warned once per holder, not at every look').toHaveLength(1);
        await held.release();
        released = true;
        if (!db.serverWide) {
          const ended = () => lines.filter((l) => l.level === 'info' && /has ended/.test(l.msg));
          while (ended().length === 0 && Date.now() < deadline) await sleep(50);
          expect(ended()).toHaveLength(1);
        }
      } finally {
        if (!released) await held.release();
        await runtime.stop();
      }
    }, 20_000);
  });
}

describe('where the database cannot tell (SQLite)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'asynccmd-cleanup-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the store has no probe, health says unknown and warns of nothing', async () => {
    const store: CommandStore = createSqliteStore({ filename: join(dir, 'q.db') });
    try {
      await store.migrate();
      expect(store.cleanupHorizon).toBeUndefined();
      const report = await checkHealth(store);
      expect(report.checks.cleanupHeldForMs).toBeNull();
      expect(report.checks.deadRows).toBeNull();
      expect(report.warnings).toEqual([]);
    } finally {
      await store.close();
    }
  });
});
