import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { CommandStore } from '@asynccmd/core';
import type { RowDataPacket } from 'mysql2/promise';
import { claimLoop } from './baselines/claim-loop.js';
import { claimMysqlBatch, MYSQL_TABLE, seedPendingMysql } from './baselines/raw-sql-mysql.js';
import { MYSQL_CONFIG, mysqlPool, recreateDatabase } from './mysql.js';
import { BENCH_TYPE, type BenchPayload } from './protocol.js';
import { benchRuntime } from './systems/asynccmd.js';

const USAGE = `node bench/dist/profile-drain-mysql.js [--processes P] [--concurrency C] [--total N] [--repeats R] [--raw] [--strategy skip-locked|legacy] [--adapter PATH]
  Drains N pre-inserted no-op commands on MariaDB/MySQL with asynccmd's defaults in P consumer
  processes (C each), R times, and prints per run: the consumers' CPU µs per command, the server's
  (mariadbd utime+stime from /proc) µs per command, statements per command as the clients sent
  them (by kind), the server's Com_/Handler_/lock counters per command, and what the claims and
  outcome writes looked like (rows per claim, empty claims, batch sizes).
  --raw drains with the raw batch-500 SQL loop instead. --adapter loads createMysqlStore from
  another build of the adapter (a directory holding its dist/index.js), to compare builds.`;

/** The drain's database: one per run (the parent's pid), so two runs at once do not share it. */
const DATABASE = `bench_profile_mysql_${process.env['PROFILE_DRAIN_RUN'] ?? process.pid}`;

/** Server counters read before and after a run (global: other clients' statements count too). */
const SERVER_COUNTERS = [
  'Questions',
  'Com_select',
  'Com_update',
  'Com_begin',
  'Com_commit',
  'Com_rollback',
  'Com_set_option',
  'Handler_read_key',
  'Handler_read_next',
  'Handler_read_rnd_next',
  'Handler_update',
  'Handler_commit',
  'Handler_rollback',
  'Innodb_row_lock_waits',
  'Innodb_deadlocks',
  'Innodb_rows_read',
  'Innodb_rows_updated',
];

interface ChildReport {
  readonly cpuMicros: number;
  /** The CPU of go → started, started → first execution, first → last, last → stop. */
  readonly startMicros: number;
  /** CPU µs per command of each successive 1000 commands this process ran. */
  readonly chunks: number[];
  readonly toFirstMicros: number;
  readonly steadyMicros: number;
  readonly tailMicros: number;
  readonly executed: number;
  /** Statements sent, by first keyword (a multi-statement query counts each). */
  readonly statements: Record<string, number>;
  /** Queries (round trips) sent. */
  readonly queries: number;
  /** Driver errors by errno. */
  readonly errors: Record<string, number>;
  readonly claims: number;
  readonly emptyClaims: number;
  readonly claimedRows: number;
  /** Rows asked for in all claims. */
  readonly askedRows: number;
  /** Claims that came back with fewer rows than asked but not empty. */
  readonly shortClaims: number;
  readonly completes: number;
  readonly completedRefs: number;
  readonly rounds: number;
}

type FromParent = { type: 'go' } | { type: 'stop' };
type FromChild =
  { type: 'ready' } | { type: 'progress'; executed: number } | { type: 'report'; report: ChildReport };

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      processes: { type: 'string', default: '4' },
      concurrency: { type: 'string', default: '10' },
      total: { type: 'string', default: '20000' },
      repeats: { type: 'string', default: '1' },
      raw: { type: 'boolean', default: false },
      strategy: { type: 'string', default: 'skip-locked' },
      adapter: { type: 'string' },
      label: { type: 'string', default: '' },
      'cpu-prof': { type: 'string' },
      callgrind: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return console.log(USAGE);
  if (process.env['PROFILE_DRAIN_CHILD'] === '1') return child();
  const total = Number(values.total);
  const processes = Number(values.processes);
  for (let r = 0; r < Number(values.repeats); r++) {
    const admin = mysqlPool(2);
    await recreateDatabase(admin, DATABASE);
    const create = await loadAdapter(values.adapter);
    const migrator = create({ connection: { ...MYSQL_CONFIG, database: DATABASE }, connectionLimit: 1 });
    await migrator.migrate();
    await migrator.close();
    const db = mysqlPool(2, DATABASE);
    await seedPendingMysql(db, BENCH_TYPE, total);
    const children = Array.from({ length: processes }, () =>
      fork(fileURLToPath(import.meta.url), process.argv.slice(2), {
        env: { ...process.env, PROFILE_DRAIN_CHILD: '1', PROFILE_DRAIN_RUN: String(process.pid) },
        ...(values.callgrind === undefined
          ? {}
          : {
              execPath: 'valgrind',
              execArgv: [
                '--tool=callgrind',
                '--smc-check=all-non-file',
                `--callgrind-out-file=${values.callgrind}/callgrind.%p`,
                process.execPath,
              ],
            }),
        ...(values['cpu-prof'] === undefined
          ? {}
          : { execArgv: ['--cpu-prof', `--cpu-prof-dir=${values['cpu-prof']}`] }),
      }),
    );
    await Promise.all(children.map((c) => once(c, 'ready')));
    const before = await serverCounters(admin);
    const serverCpu0 = mariadbdCpuMicros();
    const executed = new Map<ChildProcess, number>();
    const all = new Promise<void>((resolve) => {
      for (const c of children)
        c.on('message', (m: FromChild) => {
          if (m.type !== 'progress') return;
          executed.set(c, m.executed);
          if ([...executed.values()].reduce((a, b) => a + b, 0) >= total) resolve();
        });
    });
    const t0 = performance.now();
    for (const c of children) c.send({ type: 'go' } satisfies FromParent);
    await all;
    const ms = performance.now() - t0;
    const serverCpu = mariadbdCpuMicros() - serverCpu0;
    const after = await serverCounters(admin);
    const reports = children.map((c) => once(c, 'report'));
    for (const c of children) c.send({ type: 'stop' } satisfies FromParent);
    const got = (await Promise.all(reports)).map((m) => (m as Extract<FromChild, { type: 'report' }>).report);
    const [left] = await db.query<RowDataPacket[]>(
      `SELECT COUNT(*) AS n FROM ${MYSQL_TABLE} WHERE status <> 'SUCCESS'`,
    );
    await db.end();
    await admin.query(`DROP DATABASE IF EXISTS ${DATABASE}`);
    await admin.end();
    print(values.label, processes, total, ms, serverCpu, before, after, got, Number(left[0]?.['n']));
  }
}

function print(
  label: string,
  processes: number,
  total: number,
  ms: number,
  serverCpu: number,
  before: Map<string, number>,
  after: Map<string, number>,
  reports: readonly ChildReport[],
  notDone: number,
): void {
  const sum = (f: (r: ChildReport) => number): number => reports.reduce((a, r) => a + f(r), 0);
  const per = (n: number): string => (n / total).toFixed(4);
  const statements = new Map<string, number>();
  const errors = new Map<string, number>();
  for (const r of reports) {
    for (const [k, v] of Object.entries(r.statements)) statements.set(k, (statements.get(k) ?? 0) + v);
    for (const [k, v] of Object.entries(r.errors)) errors.set(k, (errors.get(k) ?? 0) + v);
  }
  const cpu = sum((r) => r.cpuMicros);
  const claims = sum((r) => r.claims);
  const lines = [
    `${label} P=${processes} ${total} commands: ${Math.round((total / ms) * 1000)}/s, consumer CPU ${(cpu / total).toFixed(1)} µs/cmd, mariadbd CPU ${(serverCpu / total).toFixed(1)} µs/cmd${notDone ? `, ${notDone} rows not SUCCESS` : ''}`,
    `  consumer CPU ms per process: start ${reports.map((r) => (r.startMicros / 1000).toFixed(0)).join('/')}, to first ${reports.map((r) => (r.toFirstMicros / 1000).toFixed(0)).join('/')}, steady ${reports.map((r) => (r.steadyMicros / 1000).toFixed(0)).join('/')} (${(sum((r) => r.steadyMicros) / total).toFixed(1)} µs/cmd), tail ${reports.map((r) => (r.tailMicros / 1000).toFixed(0)).join('/')}`,
    `  µs/cmd over each process's first 5000 commands ${mean(reports.flatMap((r) => r.chunks.slice(0, 5))).toFixed(1)}, after them ${mean(reports.flatMap((r) => r.chunks.slice(5))).toFixed(1)}`,
    `  µs/cmd per 1000 commands: ${reports.map((r) => r.chunks.map((c) => c.toFixed(0)).join(' ')).join(' | ')}`,
    `  client: ${per(sum((r) => r.queries))} queries/cmd; statements/cmd ${[...statements]
      .sort()
      .map(([k, v]) => `${k} ${per(v)}`)
      .join(', ')}; errors ${[...errors].map(([k, v]) => `${k}×${v}`).join(' ') || 'none'}`,
    `  claims ${claims} (${sum((r) => r.emptyClaims)} empty, ${sum((r) => r.shortClaims)} short), ${(sum((r) => r.claimedRows) / Math.max(1, claims)).toFixed(1)} rows/claim of ${(sum((r) => r.askedRows) / Math.max(1, claims)).toFixed(1)} asked; rounds ${sum((r) => r.rounds)}; completes ${sum((r) => r.completes)}, ${(
      sum((r) => r.completedRefs) /
      Math.max(
        1,
        sum((r) => r.completes),
      )
    ).toFixed(1)} refs each; per process executed ${reports.map((r) => r.executed).join('/')}`,
    `  server/cmd: ${SERVER_COUNTERS.map((k) => `${k.replace(/^(Com_|Handler_|Innodb_)/, (p) => p[0] ?? '')} ${per((after.get(k) ?? 0) - (before.get(k) ?? 0))}`).join(', ')}`,
  ];
  console.log(lines.join('\n'));
}

function mean(xs: readonly number[]): number {
  return xs.length === 0 ? NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}

async function serverCounters(pool: ReturnType<typeof mysqlPool>): Promise<Map<string, number>> {
  const [rows] = await pool.query<RowDataPacket[]>('SHOW GLOBAL STATUS');
  const wanted = new Set(SERVER_COUNTERS);
  const found = new Map<string, number>();
  for (const row of rows) {
    const name = String(row['Variable_name']);
    if (wanted.has(name)) found.set(name, Number(row['Value']));
  }
  return found;
}

/** mariadbd's (or mysqld's) user + system CPU from /proc, in µs. */
function mariadbdCpuMicros(): number {
  const pid = serverPid();
  if (pid === null) return 0;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks / 100) * 1e6;
}

let cachedPid: number | null | undefined;
function serverPid(): number | null {
  if (cachedPid !== undefined) return cachedPid;
  cachedPid = null;
  for (const name of ['mariadbd', 'mysqld']) {
    try {
      const out = execFileSync('pgrep', ['-x', name], { encoding: 'utf8' }).trim().split('\n')[0];
      if (out) return (cachedPid = Number(out));
    } catch {
      // not this name
    }
  }
  return cachedPid;
}

function once(c: ChildProcess, type: FromChild['type']): Promise<FromChild> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: FromChild): void => {
      if (m.type !== type) return;
      c.off('message', onMessage);
      resolve(m);
    };
    c.on('message', onMessage);
    c.once('exit', (code) => reject(new Error(`child exited with ${code}`)));
  });
}

type CreateStore = (options: {
  connection: typeof MYSQL_CONFIG & { database: string };
  connectionLimit: number;
  claimStrategy?: 'skip-locked' | 'legacy';
}) => CommandStore & { migrate(): Promise<void>; close(): Promise<void> };

async function loadAdapter(path: string | undefined): Promise<CreateStore> {
  const module = (await import(path === undefined ? '@asynccmd/adapter-mysql' : `${path}/dist/index.js`)) as {
    createMysqlStore: CreateStore;
  };
  return module.createMysqlStore;
}

// ── child ───────────────────────────────────────────────────────────────────────────────────────

const statements: Record<string, number> = {};
const errors: Record<string, number> = {};
let queries = 0;

/** Counts every query mysql2 sends (the pools' and their connections'), by statement kind. */
function countQueries(): void {
  const require = createRequire(import.meta.url);
  const root = require.resolve('mysql2').replace(/index\.js$/, '');
  const Base = require(`${root}lib/base/connection.js`) as {
    prototype: { query: (...args: unknown[]) => unknown };
  };
  const query = Base.prototype.query;
  Base.prototype.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0];
    const sql = typeof first === 'string' ? first : ((first as { sql?: string }).sql ?? '');
    queries++;
    for (const part of sql.split(';')) {
      const head = /^\s*(\w+)(?:\s+(\S+))?/.exec(part);
      const first = head?.[1]?.toUpperCase();
      const word = first === 'SELECT' ? `SELECT ${head?.[2] ?? ''}` : first;
      if (word) statements[word] = (statements[word] ?? 0) + 1;
    }
    const cb = args.find((a, i) => i > 0 && typeof a === 'function') as
      ((e: unknown, ...rest: unknown[]) => void) | undefined;
    if (cb) {
      const i = args.indexOf(cb);
      args[i] = (e: unknown, ...rest: unknown[]) => {
        if (e) {
          const errno = String((e as { errno?: unknown }).errno ?? 'other');
          errors[errno] = (errors[errno] ?? 0) + 1;
        }
        cb(e, ...rest);
      };
    }
    return query.apply(this, args);
  };
}

async function child(): Promise<void> {
  const { values } = parseArgs({
    options: {
      processes: { type: 'string' },
      concurrency: { type: 'string', default: '10' },
      total: { type: 'string' },
      repeats: { type: 'string' },
      raw: { type: 'boolean', default: false },
      strategy: { type: 'string', default: 'skip-locked' },
      adapter: { type: 'string' },
      label: { type: 'string' },
      'cpu-prof': { type: 'string' },
      callgrind: { type: 'string' },
    },
  });
  countQueries();
  const send = (m: FromChild): void => void process.send?.(m);
  const go = new Promise<void>((resolve) =>
    process.on('message', (m: FromParent) => m.type === 'go' && resolve()),
  );
  const stop = new Promise<void>((resolve) =>
    process.on('message', (m: FromParent) => m.type === 'stop' && resolve()),
  );
  let executed = 0;
  const chunks: number[] = [];
  let cpuAtFirst: NodeJS.CpuUsage | null = null;
  let cpuAtLast = process.cpuUsage();
  let started = false;
  let lastAtUs = 0n;
  const onExecute = (_p: BenchPayload): void => {
    if (executed++ === 0 && started) cpuAtFirst = process.cpuUsage();
    // Sampled, not per command: reading the CPU clock costs about a microsecond itself.
    if (executed % 100 !== 0) return;
    cpuAtLast = process.cpuUsage();
    lastAtUs = process.hrtime.bigint();
    if (executed % 1000 === 0) chunks.push(cpuAtLast.user + cpuAtLast.system);
  };
  const stats = {
    claims: 0,
    emptyClaims: 0,
    claimedRows: 0,
    askedRows: 0,
    shortClaims: 0,
    completes: 0,
    completedRefs: 0,
    rounds: 0,
  };
  let start: () => Promise<void>;
  let finish: () => Promise<void>;
  if (values.raw) {
    const pool = mysqlPool(2, DATABASE);
    await pool.query('SELECT 1');
    let stopped = false;
    let loop: Promise<void> = Promise.resolve();
    start = async () => {
      loop = claimLoop(
        async () => {
          const batch = await claimMysqlBatch(pool, BENCH_TYPE, 500);
          stats.claims++;
          stats.askedRows += 500;
          const n = batch?.payloads.length ?? 0;
          stats.claimedRows += n;
          if (n === 0) stats.emptyClaims++;
          else if (n < 500) stats.shortClaims++;
          if (batch) {
            stats.completes++;
            stats.completedRefs += n;
          }
          return batch;
        },
        onExecute,
        () => stopped,
      );
    };
    finish = async () => {
      stopped = true;
      await loop;
      await pool.end();
    };
  } else {
    const create = await loadAdapter(values.adapter);
    const store = create({
      connection: { ...MYSQL_CONFIG, database: DATABASE },
      connectionLimit: 4,
      claimStrategy: values.strategy as 'skip-locked' | 'legacy',
    });
    await Promise.all(Array.from({ length: 4 }, () => store.ping()));
    const claimDue = store.claimDue.bind(store);
    store.claimDue = async (params) => {
      const rows = await claimDue(params);
      stats.claims++;
      stats.askedRows += params.limit;
      stats.claimedRows += rows.length;
      if (rows.length === 0) stats.emptyClaims++;
      else if (rows.length < params.limit) stats.shortClaims++;
      return rows;
    };
    const complete = store.complete.bind(store);
    store.complete = async (refs) => {
      stats.completes++;
      stats.completedRefs += refs.length;
      return complete(refs);
    };
    const runtime = benchRuntime(
      store,
      { concurrency: Number(values.concurrency) },
      { mode: 'ASYNC_POOL', onExecute },
    );
    runtime.events.onKind('round', () => {
      stats.rounds++;
    });
    start = async () => {
      await runtime.start();
    };
    finish = async () => {
      await runtime.stop();
      await store.close();
    };
  }
  send({ type: 'ready' });
  await go;
  const goAtUs = Number(process.hrtime.bigint() / 1000n);
  const cpu0 = process.cpuUsage();
  started = true;
  await start();
  const cpuStarted = process.cpuUsage();
  let reported = -1;
  const progress = setInterval(() => {
    if (executed !== reported) send({ type: 'progress', executed: (reported = executed) });
  }, 20);
  await stop;
  clearInterval(progress);
  const cpu = process.cpuUsage(cpu0);
  const us = (a: NodeJS.CpuUsage, b: NodeJS.CpuUsage): number => b.user + b.system - a.user - a.system;
  const first = cpuAtFirst ?? cpuAtLast;
  const split = {
    startMicros: us(cpu0, cpuStarted),
    toFirstMicros: us(cpuStarted, first),
    steadyMicros: us(first, cpuAtLast),
    tailMicros: us(cpuAtLast, process.cpuUsage()),
  };
  await finish();
  if (values['cpu-prof'] !== undefined) {
    const { writeFileSync } = await import('node:fs');
    const window = { goAtUs, lastAtUs: Number(lastAtUs / 1000n) };
    writeFileSync(`${values['cpu-prof']}/window-${process.pid}.json`, JSON.stringify(window));
  }
  send({
    type: 'report',
    report: {
      cpuMicros: cpu.user + cpu.system,
      ...split,
      chunks: chunks.map(
        (c, i) => (i === 0 ? c - (first.user + first.system) : c - (chunks[i - 1] ?? 0)) / 1000,
      ),
      executed,
      statements,
      errors,
      queries,
      ...stats,
    },
  });
  process.disconnect?.();
}

main().then(
  () => {
    if (process.env['PROFILE_DRAIN_CHILD'] !== '1') process.exit();
  },
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
