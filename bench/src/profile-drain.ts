import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { claimLoop, type ClaimedBatch } from './baselines/claim-loop.js';
import { claimPgBatch, rawTable, seedPending } from './baselines/raw-sql-pg.js';
import { claimSqliteBatch, openSqlite, seedPendingSqlite } from './baselines/raw-sql-sqlite.js';
import { pgPool, recreateSchema, PG_URL } from './pg.js';
import { BENCH_TYPE, type BenchPayload } from './protocol.js';
import { migrateWith } from './scenarios/migrate.js';
import { benchRuntime, openStore } from './systems/asynccmd.js';
import { createPostgresStore } from '@asynccmd/adapter-postgres';

const USAGE = `node bench/dist/profile-drain.js [--db pg|sqlite] [--total N] [--concurrency C] [--repeats R] [--rounds] [--raw]
  Drains N pre-inserted no-op commands with asynccmd's defaults in this one process, R times,
  and prints CPU µs per command (process.cpuUsage, from start to stop), the rate and peak RSS.
  --raw drains with the raw batch-500 SQL loop instead (the physical reference).
  --rounds also counts poll rounds and rows per claiming round.
  For profiling: node --cpu-prof bench/dist/profile-drain.js …`;

const SCHEMA = 'bench_profile';

/**
 * A single-process drain for studying the consumer's own cost: no children, no orchestrator, so
 * a CPU profile or an instruction count covers the runtime and the driver only.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      db: { type: 'string', default: 'pg' },
      total: { type: 'string', default: '20000' },
      concurrency: { type: 'string', default: '10' },
      repeats: { type: 'string', default: '1' },
      rounds: { type: 'boolean', default: false },
      raw: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return console.log(USAGE);
  const total = Number(values.total);
  const concurrency = Number(values.concurrency);
  const dir = mkdtempSync(join(tmpdir(), 'asynccmd-profile-'));
  try {
    for (let r = 0; r < Number(values.repeats); r++) {
      const result =
        values.db === 'sqlite'
          ? await drainSqlite(join(dir, `p${r}.db`), total, concurrency, values.rounds, values.raw)
          : await drainPg(total, concurrency, values.rounds, values.raw);
      console.log(
        `${values.db} C=${concurrency} ${total} commands: ${Math.round(result.rate)}/s, ` +
          `${result.cpuUs.toFixed(1)} µs CPU per command, peak RSS ${Math.round(process.resourceUsage().maxRSS / 1024)} MiB` +
          result.rounds,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface ProfileResult {
  readonly rate: number;
  readonly cpuUs: number;
  readonly rounds: string;
}

async function drainPg(
  total: number,
  concurrency: number,
  rounds: boolean,
  raw: boolean,
): Promise<ProfileResult> {
  const admin = pgPool(1);
  try {
    await recreateSchema(admin, SCHEMA);
    await migrateWith(() =>
      createPostgresStore({ connectionString: PG_URL, schema: SCHEMA, poolConfig: { max: 1 } }),
    );
    await admin.query(`ALTER TABLE ${rawTable(SCHEMA)} SET (autovacuum_enabled = false)`);
    await seedPending(admin, rawTable(SCHEMA), BENCH_TYPE, total);
  } finally {
    await admin.end();
  }
  if (raw) {
    const pool = pgPool(2, true);
    await pool.query('SELECT 1');
    try {
      return await rawDrain(total, () => claimPgBatch(pool, SCHEMA, RAW_BATCH));
    } finally {
      await pool.end();
    }
  }
  const store = await openStore({ kind: 'asynccmd-pg', schema: SCHEMA }, 4);
  return drain(store, total, concurrency, rounds);
}

async function drainSqlite(
  filename: string,
  total: number,
  concurrency: number,
  rounds: boolean,
  raw: boolean,
): Promise<ProfileResult> {
  await migrateWith(() => createSqliteStore({ filename }));
  const db = openSqlite(filename);
  seedPendingSqlite(db, BENCH_TYPE, total);
  if (raw) {
    try {
      return await rawDrain(total, async () => claimSqliteBatch(db, BENCH_TYPE, RAW_BATCH));
    } finally {
      db.close();
    }
  }
  db.close();
  const store = await openStore({ kind: 'asynccmd-sqlite', filename }, 4);
  return drain(store, total, concurrency, rounds);
}

const RAW_BATCH = 500;

async function rawDrain(total: number, claim: () => Promise<ClaimedBatch | null>): Promise<ProfileResult> {
  let executed = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await claimLoop(
    claim,
    () => {
      executed++;
    },
    () => executed >= total,
    1,
  );
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { rate: (total / ms) * 1000, cpuUs: (cpu.user + cpu.system) / total, rounds: ' (raw loop)' };
}

async function drain(
  store: Awaited<ReturnType<typeof openStore>>,
  total: number,
  concurrency: number,
  countRounds: boolean,
): Promise<ProfileResult> {
  let executed = 0;
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (done = resolve));
  const runtime = benchRuntime(
    store,
    { concurrency },
    {
      mode: 'ASYNC_POOL',
      onExecute: (_payload: BenchPayload) => {
        if (++executed === total) done();
      },
    },
  );
  let rounds = 0;
  let claiming = 0;
  let claimed = 0;
  if (countRounds)
    runtime.events.onKind('round', (event) => {
      rounds++;
      if (event.claimed > 0) claiming++;
      claimed += event.claimed;
    });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await runtime.start();
  await all;
  await runtime.stop();
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return {
    rate: (total / ms) * 1000,
    cpuUs: (cpu.user + cpu.system) / total,
    rounds: countRounds
      ? `, ${rounds} rounds, ${(claimed / Math.max(1, claiming)).toFixed(1)} rows per claiming round`
      : '',
  };
}

main().then(
  () => process.exit(),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
