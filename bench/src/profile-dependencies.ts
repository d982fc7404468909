import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { CommandStore } from '@asynccmd/core';
import { createMysqlStore } from '@asynccmd/adapter-mysql';
import { createPostgresStore } from '@asynccmd/adapter-postgres';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import type { RowDataPacket } from 'mysql2/promise';
import { mysqlPool, recreateDatabase } from './mysql.js';
import { PG_URL, pgPool, recreateSchema } from './pg.js';
import { BENCH_TYPE } from './protocol.js';
import { submitBatch, submitWorkflowGraph } from './scenarios/workflows.js';

const USAGE = `node bench/dist/profile-dependencies.js [--db pg|mysql|sqlite] [--total N] [--batch B] [--repeats R]
  What completing commands costs with dependants, against the same without: N commands submitted
  through the client (none: submitMany; chains: the bench's 3-level workflow graph; batch: N − 1
  members and a callback, as the bench's batch row), claimed 500 at a time by the store's
  claimDue and completed B at a time (default 100) by its complete, with no runtime. Per completed
  command: the completes' wall time; on PostgreSQL the server's CPU in them (the backends' on-CPU
  time from /proc/<pid>/schedstat: the server must run on this machine); on MySQL/MariaDB the
  statements they sent (the session's Questions, one connection); on SQLite this process's CPU. R repeats (default 3), the shapes
  interleaved.`;

type Shape = 'none' | 'chains' | 'batch';
const SHAPES: readonly Shape[] = ['none', 'chains', 'batch'];

/** A database to profile on: a fresh store each time, and what it can count around a complete. */
interface Profiled {
  /** A fresh, migrated schema (database, file). */
  prepare(): Promise<void>;
  /** A store on it. */
  connect(): CommandStore;
  /** A counter read before and after the completes (server CPU ns, statements), or null. */
  counter(): Promise<() => Promise<number>>;
  readonly counted: string;
  dispose(): Promise<void>;
}

const APPLICATION = 'asynccmd-profile-dependencies';

function postgres(): Profiled {
  const admin = pgPool(1);
  const schema = 'bench_profile_dependencies';
  const open = () =>
    createPostgresStore({
      connectionString: PG_URL,
      schema,
      poolConfig: { max: 2, application_name: APPLICATION },
    });
  return {
    prepare: async () => {
      await recreateSchema(admin, schema);
      const store = open();
      await store.migrate();
      await store.close();
    },
    connect: open,
    // Every backend of the store's connections: the trigger's work runs in the completes' backend.
    counter: async () => async () => {
      const { rows } = await admin.query<{ pid: number }>(
        'SELECT pid FROM pg_stat_activity WHERE application_name = $1',
        [APPLICATION],
      );
      let ns = 0;
      for (const { pid } of rows) {
        try {
          ns += Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
        } catch {
          return Number.NaN; // not a server on this machine
        }
      }
      return ns / 1000;
    },
    counted: 'server CPU µs',
    dispose: () => admin.end(),
  };
}

function mysql(): Profiled {
  const admin = mysqlPool(1);
  const database = 'bench_profile_dependencies';
  let pool: ReturnType<typeof mysqlPool> | null = null;
  return {
    prepare: async () => {
      await recreateDatabase(admin, database);
      await pool?.end();
      // One connection: the session's counters see every statement of the store.
      pool = mysqlPool(1, database);
      await createMysqlStore({ pool }).migrate();
    },
    // Its close() leaves the pool (the caller's) open.
    connect: () => createMysqlStore({ pool: pool! }),
    counter: async () => async () => {
      const [rows] = await pool!.query<RowDataPacket[]>("SHOW SESSION STATUS LIKE 'Questions'");
      // Less the SHOW itself.
      return Number(rows[0]?.['Value'] ?? Number.NaN) - 1;
    },
    counted: 'statements',
    dispose: async () => {
      await pool?.end();
      await admin.query(`DROP DATABASE IF EXISTS ${database}`);
      await admin.end();
    },
  };
}

function sqlite(): Profiled {
  const filename = join(tmpdir(), `asynccmd-profile-dependencies-${process.pid}.db`);
  const remove = () => {
    for (const suffix of ['', '-wal', '-shm']) rmSync(filename + suffix, { force: true });
  };
  return {
    prepare: async () => {
      remove();
      const store = createSqliteStore({ filename });
      await store.migrate();
      await store.close();
    },
    connect: () => createSqliteStore({ filename }),
    // SQLite runs in this process: its CPU in the completes is this process's.
    counter: async () => async () => {
      const cpu = process.cpuUsage();
      return cpu.user + cpu.system;
    },
    counted: 'CPU µs',
    dispose: async () => remove(),
  };
}

/** Submits `total` commands of `shape`, then claims and completes them all; per completed command. */
async function run(
  db: Profiled,
  shape: Shape,
  total: number,
  batch: number,
): Promise<{ us: number; counted: number }> {
  await db.prepare();
  if (shape === 'chains') await submitWorkflowGraph(() => db.connect(), 1, total);
  else if (shape === 'batch') await submitBatch(() => db.connect(), 1, total);
  const store = db.connect();
  try {
    if (shape === 'none')
      await store.transaction((tx) =>
        store.insert(
          tx,
          Array.from({ length: total }, (_, i) => ({
            type: BENCH_TYPE,
            payloadJson: JSON.stringify({ seq: i + 1 }),
            maxRetry: 5,
          })),
        ),
      );
    const read = await db.counter();
    let ms = 0;
    let counted = 0;
    for (let done = 0; done < total;) {
      const rows = await store.claimDue({
        types: [BENCH_TYPE],
        limit: 500,
        now: new Date(Date.now() + 1_000),
        token: randomUUID(),
        leaseMs: 60_000,
      });
      if (rows.length === 0) throw new Error(`${shape}: nothing to claim after ${done} of ${total}`);
      for (let i = 0; i < rows.length; i += batch) {
        const before = await read();
        const began = performance.now();
        await store.complete(rows.slice(i, i + batch).map((r) => ({ id: r.id, token: r.claimToken })));
        ms += performance.now() - began;
        counted += (await read()) - before;
      }
      done += rows.length;
    }
    return { us: (ms * 1000) / total, counted: counted / total };
  } finally {
    await store.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      db: { type: 'string', default: 'pg' },
      total: { type: 'string', default: '3000' },
      batch: { type: 'string', default: '100' },
      repeats: { type: 'string', default: '3' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return console.log(USAGE);
  const open = { pg: postgres, mysql, sqlite }[values.db as 'pg' | 'mysql' | 'sqlite'];
  if (open === undefined) throw new Error(USAGE);
  const total = Number(values.total);
  const batch = Number(values.batch);
  const db = open();
  const results = new Map<Shape, { us: number; counted: number }[]>();
  try {
    for (let r = 0; r < Number(values.repeats); r++) {
      for (const shape of SHAPES) {
        results.set(shape, [...(results.get(shape) ?? []), await run(db, shape, total, batch)]);
      }
    }
  } finally {
    await db.dispose();
  }
  console.log(`${values.db}: ${total} commands, completes of ${batch}, per completed command:`);
  const fmt = (xs: number[]) => xs.map((x) => (x >= 10 ? Math.round(x) : x.toFixed(2))).join(' ');
  for (const [shape, runs] of results) {
    const counted = `; ${db.counted} ${fmt(runs.map((x) => x.counted))}`;
    console.log(`  ${shape.padEnd(6)} complete µs ${fmt(runs.map((x) => x.us))}${counted}`);
  }
}

main().then(
  () => process.exit(),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  },
);
