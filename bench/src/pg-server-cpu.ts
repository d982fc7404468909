import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createPostgresStore } from '@asynccmd/adapter-postgres';
import type { CommandStore } from '@asynccmd/core';
import type pg from 'pg';
import { BackendSampler } from './backend-cpu.js';
import { claimLoop } from './baselines/claim-loop.js';
import { migrateGraphile, runGraphile, seedGraphile } from './baselines/graphile.js';
import { claimPgBatch, rawTable, seedPending } from './baselines/raw-sql-pg.js';
import { pgPool, PG_URL, recreateSchema } from './pg.js';
import { BENCH_TYPE, type BenchPayload } from './protocol.js';
import { migrateWith } from './scenarios/migrate.js';
import { TYPE_LIMIT } from './scenarios/usage.js';
import { benchRuntime, openStore } from './systems/asynccmd.js';

const USAGE = `node bench/dist/pg-server-cpu.js [--system asynccmd|raw|graphile] [--total N] [--concurrency C]
    [--repeats R] [--split] [--items] [--processes P] [--type-limit]
  Drains N pre-inserted no-op commands in this one process with one system (asynccmd defaults, the raw
  batch-500 loop, graphile-worker 0.18 with its local queue and batched completion) and prints, per
  command: the consumer's CPU, the CPU of the database backends serving it (utime+stime from
  /proc/<pid>/stat and the scheduler's run time from /proc/<pid>/schedstat, of every backend whose
  application_name is the consumer's), and the table's row and index writes (pg_stat_user_tables,
  index sizes). The database server must run on this machine and /proc of its processes be readable.
  --split (asynccmd only) also times the store calls: how long claims and outcome writes were in
  flight, how much they overlapped, and the rows per claim.
  --items also counts the leaf items of each btree index before and after (pageinspect, created in
  the database if missing); deduplication and bottom-up deletion keep that below the insertions.
  --processes P (asynccmd only): P consumer processes of C each drain the table together; the
  consumer CPU is theirs summed.
  --type-limit (asynccmd only): the bench's "type limit" row, typeLimits of TYPE_LIMIT (never reached)
  on the drained type, so every claim locks the type's limit row and counts its RUNNING commands.
  Shared server processes (walwriter, checkpointer) are left out: other clients of the server pay
  into them too. Point BENCH_PG_URL at a database of its own to keep other clients' rows apart.`;

/** The application_name of the consumer's connections: how its backends are told from others. */
const CONSUMER_APP = 'asynccmd-server-cpu-consumer';
const SCHEMAS = { asynccmd: 'srvcpu_asynccmd', raw: 'srvcpu_raw', graphile: 'srvcpu_graphile' } as const;
type System = keyof typeof SCHEMAS;
const RAW_BATCH = 500;

interface TableWrites {
  readonly ins: number;
  readonly upd: number;
  readonly hot: number;
  readonly del: number;
  readonly heapBytes: number;
  readonly indexBytes: Record<string, number>;
}

async function tableWrites(admin: pg.Pool, schema: string, table: string): Promise<TableWrites> {
  await admin.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await admin.query<{ ins: string; upd: string; hot: string; del: string; heap: string }>(
    `SELECT n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot, n_tup_del AS del,
            pg_relation_size(relid) AS heap
     FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2`,
    [schema, table],
  );
  const indexes = await admin.query<{ name: string; bytes: string }>(
    `SELECT indexrelname AS name, pg_relation_size(indexrelid) AS bytes
     FROM pg_stat_user_indexes WHERE schemaname = $1 AND relname = $2 ORDER BY indexrelname`,
    [schema, table],
  );
  const r = rows[0];
  return {
    ins: Number(r?.ins ?? 0),
    upd: Number(r?.upd ?? 0),
    hot: Number(r?.hot ?? 0),
    del: Number(r?.del ?? 0),
    heapBytes: Number(r?.heap ?? 0),
    indexBytes: Object.fromEntries(indexes.rows.map((i) => [i.name, Number(i.bytes)])),
  };
}

/**
 * Index tuples each index received during the drain, counted from the row versions themselves:
 * for every index, the live and dead leaf items of its pages (pageinspect), less what it held before.
 */
async function indexItems(admin: pg.Pool, schema: string, table: string): Promise<Record<string, number>> {
  const { rows } = await admin.query<{ name: string; items: string }>(
    `SELECT i.indexrelname AS name,
            (SELECT coalesce(sum(s.live_items + s.dead_items), 0)
               FROM generate_series(1, (pg_relation_size(i.indexrelid) / 8192)::int - 1) AS b,
                    LATERAL bt_page_stats(i.indexrelid::regclass::text, b) AS s
              WHERE s.type = 'l') AS items
     FROM pg_stat_user_indexes i JOIN pg_am a ON a.oid = (SELECT relam FROM pg_class WHERE oid = i.indexrelid)
     WHERE i.schemaname = $1 AND i.relname = $2 AND a.amname = 'btree'
     ORDER BY 1`,
    [schema, table],
  );
  return Object.fromEntries(rows.map((r) => [r.name, Number(r.items)]));
}

/** Store calls timed: when claims and outcome writes were in flight, and what claims returned. */
class StoreTimer {
  claimUs = 0;
  outcomeUs = 0;
  eitherUs = 0;
  bothUs = 0;
  claims = 0;
  claimedRows = 0;
  claimLimits = 0;
  emptyClaims = 0;
  outcomes = 0;
  outcomeRows = 0;
  #claimsInFlight = 0;
  #outcomesInFlight = 0;
  #since = performance.now();

  #advance(): void {
    const now = performance.now();
    const us = (now - this.#since) * 1000;
    this.#since = now;
    if (this.#claimsInFlight > 0) this.claimUs += us;
    if (this.#outcomesInFlight > 0) this.outcomeUs += us;
    if (this.#claimsInFlight > 0 || this.#outcomesInFlight > 0) this.eitherUs += us;
    if (this.#claimsInFlight > 0 && this.#outcomesInFlight > 0) this.bothUs += us;
  }

  wrap(store: CommandStore): CommandStore {
    return new Proxy(store, {
      get: (target, key, receiver) => {
        const value: unknown = Reflect.get(target, key, receiver);
        if (typeof value !== 'function') return value;
        const fn = value as (...args: unknown[]) => unknown;
        if (key === 'claimDue') {
          return async (...args: unknown[]) => {
            this.#advance();
            this.#claimsInFlight++;
            this.claimLimits += (args[0] as { limit: number }).limit;
            try {
              const rows = (await fn.apply(target, args)) as unknown[];
              this.claims++;
              this.claimedRows += rows.length;
              if (rows.length === 0) this.emptyClaims++;
              return rows;
            } finally {
              this.#advance();
              this.#claimsInFlight--;
            }
          };
        }
        if (key === 'complete' || key === 'fail') {
          return async (...args: unknown[]) => {
            this.#advance();
            this.#outcomesInFlight++;
            this.outcomes++;
            this.outcomeRows += (args[0] as unknown[]).length;
            try {
              return await fn.apply(target, args);
            } finally {
              this.#advance();
              this.#outcomesInFlight--;
            }
          };
        }
        return fn.bind(target);
      },
    });
  }
}

interface DrainFigures {
  readonly ms: number;
  readonly cpuUs: number;
  readonly server: { statUs: number; runUs: number; backends: number };
  /** Share of the wall time the consumer's event loop sat idle: waiting on the database. */
  readonly idle: number;
  readonly split?: StoreTimer;
}

async function prepare(admin: pg.Pool, system: System, total: number): Promise<void> {
  const schema = SCHEMAS[system];
  if (system === 'graphile') {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await migrateGraphile(schema);
    await admin.query(`ALTER TABLE ${schema}._private_jobs SET (autovacuum_enabled = false)`);
    await seedGraphile(admin, schema, total);
  } else {
    await recreateSchema(admin, schema);
    await migrateWith(() =>
      createPostgresStore({ connectionString: PG_URL, schema, poolConfig: { max: 1 } }),
    );
    await admin.query(`ALTER TABLE ${rawTable(schema)} SET (autovacuum_enabled = false)`);
    await seedPending(admin, rawTable(schema), BENCH_TYPE, total);
  }
  await admin.query('CHECKPOINT');
}

async function drain(
  admin: pg.Pool,
  system: System,
  total: number,
  concurrency: number,
  split: boolean,
  typeLimit: number | undefined,
): Promise<DrainFigures> {
  const schema = SCHEMAS[system];
  let executed = 0;
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (done = resolve));
  const onExecute = (_payload: BenchPayload): void => {
    if (++executed === total) done();
  };
  const sampler = new BackendSampler(admin, CONSUMER_APP);
  let start: () => Promise<void>;
  let stop: () => Promise<void>;
  let timer: StoreTimer | undefined;
  if (system === 'asynccmd') {
    const opened = await openStore({ kind: 'asynccmd-pg', schema }, 4);
    timer = split ? new StoreTimer() : undefined;
    const store = timer ? timer.wrap(opened) : opened;
    const runtime = benchRuntime(store, { concurrency }, { mode: 'ASYNC_POOL', onExecute }, typeLimit);
    start = async () => {
      await runtime.start();
    };
    stop = async () => {
      await runtime.stop();
      await opened.close();
    };
  } else if (system === 'raw') {
    const pool = pgPool(2, true);
    await pool.query('SELECT 1');
    let looping: Promise<void> = Promise.resolve();
    start = async () => {
      looping = claimLoop(
        () => claimPgBatch(pool, schema, RAW_BATCH),
        onExecute,
        () => executed >= total,
        1,
      );
    };
    stop = async () => {
      await looping;
      await pool.end();
    };
  } else {
    let runner: { stop(): Promise<void> } | undefined;
    start = async () => {
      runner = await runGraphile(schema, concurrency, true, onExecute);
    };
    stop = async () => {
      await runner?.stop();
    };
  }
  await sampler.start();
  const cpu0 = process.cpuUsage();
  const elu0 = performance.eventLoopUtilization();
  const t0 = performance.now();
  await start();
  await all;
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const elu = performance.eventLoopUtilization(elu0);
  // The backends' times before their connections close (a closed backend's times are gone).
  const server = await sampler.stop();
  await stop();
  return {
    ms,
    cpuUs: cpu.user + cpu.system,
    server,
    idle: 1 - elu.utilization,
    ...(timer ? { split: timer } : {}),
  };
}

/**
 * One of --processes' consumers: connects, starts on 'go', stops on 'stop' and answers with its
 * CPU time (µs) from go to the end of its shutdown.
 */
async function child(concurrency: number, typeLimit: number | undefined): Promise<void> {
  const store = await openStore({ kind: 'asynccmd-pg', schema: SCHEMAS.asynccmd }, 4);
  const runtime = benchRuntime(
    store,
    { concurrency },
    { mode: 'ASYNC_POOL', onExecute: () => undefined },
    typeLimit,
  );
  const send = (m: unknown): Promise<void> =>
    new Promise((resolve) => process.send?.(m, undefined, {}, () => resolve()));
  let cpu0 = process.cpuUsage();
  process.on('message', (m: string) => {
    if (m === 'go') {
      cpu0 = process.cpuUsage();
      void runtime.start();
    } else if (m === 'stop') {
      void (async () => {
        await runtime.stop();
        await store.close();
        const cpu = process.cpuUsage(cpu0);
        await send(cpu.user + cpu.system);
        process.exit();
      })();
    }
  });
  await send('ready');
}

/** --processes: `processes` children drain the table; the parent watches it empty. */
async function drainInProcesses(
  admin: pg.Pool,
  total: number,
  concurrency: number,
  processes: number,
  typeLimit: number | undefined,
): Promise<DrainFigures> {
  const script = fileURLToPath(import.meta.url);
  const children = Array.from({ length: processes }, () =>
    fork(script, ['--child', '--concurrency', String(concurrency), ...(typeLimit ? ['--type-limit'] : [])], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  const next = (c: ReturnType<typeof fork>): Promise<unknown> =>
    new Promise((resolve) => c.once('message', resolve));
  await Promise.all(children.map(next));
  const sampler = new BackendSampler(admin, CONSUMER_APP);
  await sampler.start();
  const t0 = performance.now();
  for (const c of children) c.send('go');
  for (;;) {
    const { rows } = await admin.query(
      `SELECT 1 FROM ${rawTable(SCHEMAS.asynccmd)} WHERE status IN ('PENDING', 'RUNNING') LIMIT 1`,
    );
    if (rows.length === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  const ms = performance.now() - t0;
  const server = await sampler.stop();
  const cpus = await Promise.all(
    children.map((c) => {
      const answer = next(c);
      c.send('stop');
      return answer;
    }),
  );
  void total;
  return { ms, cpuUs: cpus.reduce((a: number, b) => a + Number(b), 0), server, idle: Number.NaN };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      system: { type: 'string', default: 'asynccmd' },
      total: { type: 'string', default: '30000' },
      concurrency: { type: 'string', default: '10' },
      repeats: { type: 'string', default: '1' },
      split: { type: 'boolean', default: false },
      processes: { type: 'string', default: '1' },
      child: { type: 'boolean', default: false },
      items: { type: 'boolean', default: false },
      'type-limit': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return console.log(USAGE);
  const typeLimit = values['type-limit'] ? TYPE_LIMIT : undefined;
  if (values.child) {
    await child(Number(values.concurrency), typeLimit);
    // The child exits once it has answered 'stop'.
    return new Promise<void>(() => undefined);
  }
  const system = values.system as System;
  if (!(system in SCHEMAS)) throw new Error(`--system must be one of ${Object.keys(SCHEMAS).join(', ')}`);
  if (typeLimit !== undefined && system !== 'asynccmd')
    throw new Error('--type-limit is for --system asynccmd');
  const total = Number(values.total);
  const concurrency = Number(values.concurrency);
  // Every connection the consumer opens from here on carries this name (pg reads PGAPPNAME).
  const admin = pgPool(1);
  await admin.query("SET application_name = 'asynccmd-server-cpu-admin'");
  process.env['PGAPPNAME'] = CONSUMER_APP;
  const table = system === 'graphile' ? '_private_jobs' : 'async_command';
  try {
    if (values.items) await admin.query('CREATE EXTENSION IF NOT EXISTS pageinspect');
    for (let r = 0; r < Number(values.repeats); r++) {
      await prepare(admin, system, total);
      const itemsBefore = values.items ? await indexItems(admin, SCHEMAS[system], table) : {};
      const before = await tableWrites(admin, SCHEMAS[system], table);
      const processes = Number(values.processes);
      const f =
        processes > 1 && system === 'asynccmd'
          ? await drainInProcesses(admin, total, concurrency, processes, typeLimit)
          : await drain(admin, system, total, concurrency, values.split, typeLimit);
      // Statistics reach the shared counters when a backend goes idle or exits: the consumer has closed.
      await new Promise((resolve) => setTimeout(resolve, 1200));
      const after = await tableWrites(admin, SCHEMAS[system], table);
      const per = (n: number): string => (n / total).toFixed(2);
      const indexGrowth = Object.entries(after.indexBytes)
        .map(
          ([name, bytes]) =>
            `${name.replace(/^async_command_/, '')} +${per(bytes - (before.indexBytes[name] ?? 0))}`,
        )
        .join(', ');
      console.log(
        `${system}${typeLimit ? ` type limit ${typeLimit}` : ''} C=${concurrency}×${values.processes} ${total}: ${Math.round((total / f.ms) * 1000)}/s; consumer ${(f.cpuUs / total).toFixed(1)} µs/cmd; ` +
          `server backends (${f.server.backends}) ${(f.server.statUs / total).toFixed(1)} µs/cmd utime+stime, ` +
          `${(f.server.runUs / total).toFixed(1)} µs/cmd run time; event loop idle ${(f.idle * 100).toFixed(0)} % ` +
          `(${((f.idle * f.ms * 1000) / total).toFixed(1)} µs/cmd); per command: upd ${per(after.upd - before.upd)} ` +
          `(HOT ${per(after.hot - before.hot)}), del ${per(after.del - before.del)}, heap +${per(after.heapBytes - before.heapBytes)} B, ` +
          `index bytes/cmd: ${indexGrowth}`,
      );
      if (values.items) {
        const itemsAfter = await indexItems(admin, SCHEMAS[system], table);
        console.log(
          '  index leaf items per command: ' +
            Object.entries(itemsAfter)
              .map(
                ([name, n]) => `${name.replace(/^async_command_/, '')} ${per(n - (itemsBefore[name] ?? 0))}`,
              )
              .join(', '),
        );
      }
      const s = f.split;
      if (s) {
        const wall = f.ms * 1000;
        const pct = (us: number): string => `${((us / wall) * 100).toFixed(0)} %`;
        console.log(
          `  wall ${(wall / 1000).toFixed(0)} ms: claim in flight ${pct(s.claimUs)}, outcome write in flight ${pct(s.outcomeUs)}, ` +
            `both ${pct(s.bothUs)}, neither (consumer alone) ${pct(wall - s.eitherUs)}; ${s.claims} claims ` +
            `(${s.emptyClaims} empty, ${(s.claimedRows / Math.max(1, s.claims - s.emptyClaims)).toFixed(0)} rows per non-empty, ` +
            `${(s.claimLimits / Math.max(1, s.claims)).toFixed(0)} asked for), ` +
            `${(s.claimUs / Math.max(1, s.claims)).toFixed(0)} µs per claim; ${s.outcomes} outcome writes ` +
            `(${(s.outcomeRows / Math.max(1, s.outcomes)).toFixed(0)} rows each), ${(s.outcomeUs / Math.max(1, s.outcomes)).toFixed(0)} µs each`,
        );
      }
    }
  } finally {
    await admin.end();
  }
}

main().then(
  () => process.exit(),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
