import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { claimLoop, type ClaimedBatch } from './baselines/claim-loop.js';
import { claimPgBatch, rawTable, seedPending } from './baselines/raw-sql-pg.js';
import { claimSqliteBatch, openSqlite, seedPendingSqlite, SQLITE_TABLE } from './baselines/raw-sql-sqlite.js';
import { pgPool, recreateSchema, PG_URL } from './pg.js';
import { BENCH_TYPE, EFFECT_TABLE, type BenchPayload, type EffectMode } from './protocol.js';
import { migrateWith } from './scenarios/migrate.js';
import {
  MYSQL_USAGE,
  ORDERING_KEYS,
  PG_USAGE,
  SQLITE_USAGE,
  TYPE_LIMIT,
  FEATURE_USAGES,
  flowUsage,
  usageSubmit,
  usageTypeLimit,
  usageUpdates,
  type FeatureUsage,
} from './scenarios/usage.js';
import { benchRuntime, openStore, type BenchExecutor } from './systems/asynccmd.js';
import { effectExecutor, storeConnections } from './systems/effects.js';
import { createPostgresStore } from '@asynccmd/adapter-postgres';
import { createMysqlStore } from '@asynccmd/adapter-mysql';
import { MYSQL_TABLE, seedPendingMysql } from './baselines/raw-sql-mysql.js';
import { MYSQL_CONFIG, mysqlPool, recreateDatabase } from './mysql.js';

const USAGE = `node bench/dist/profile-drain.js [--db pg|sqlite|mysql] [--total N] [--concurrency C] [--repeats R] [--rounds] [--raw] [--store-loop] [--keyed|--type-limit|--usage KEY] [--scheduled]
  Drains N pre-inserted no-op commands with asynccmd's defaults in this one process, R times,
  and prints CPU µs per command (process.cpuUsage, from start to stop), the rate and peak RSS.
  --raw drains with the raw batch-500 SQL loop instead (the physical reference; pg and sqlite).
  --store-loop drains with the store's own claimDue / complete in batches of 500 and no runtime:
  what the adapter costs, apart from the runtime's per-command work.
  mysql: the skip-locked claim strategy, on the database bench_profile.
  --rounds also counts poll rounds and rows per claiming round.
  --instances N runs N runtimes in this process, each with its own store, claiming from one table.
  --keyed spreads the backlog over ORDERING_KEYS ordering keys, as the bench's "ordering keys" row.
  --type-limit gives the runtimes the bench's "type limit" row's typeLimits (TYPE_LIMIT, never reached).
  --usage KEY drains as the bench's row of that usage (fair-share, key-limit, rate-limit, priorities, …;
  workflow-graph and batch-callback submit their backlog through the client, as the bench does).
  --effect transactional|own-transaction (pg): each command inserts one row into an effect table, as
  the bench's effect drains (in the attempt's transaction, or autocommitted on a pool of its own).
  --scheduled runs the bench executor in the default mode, SCHEDULED (inline in the poll loop, one
  at a time; C does not apply), not ASYNC_POOL on a shared pool of C.
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
      'store-loop': { type: 'boolean', default: false },
      keyed: { type: 'boolean', default: false },
      'type-limit': { type: 'boolean', default: false },
      scheduled: { type: 'boolean', default: false },
      instances: { type: 'string', default: '1' },
      usage: { type: 'string' },
      effect: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return console.log(USAGE);
  const total = Number(values.total);
  const concurrency = Number(values.concurrency);
  if (values.keyed && values['type-limit'])
    throw new Error('--keyed and --type-limit are two bench rows: pick one');
  // The store loop claims without the runtime, which is what declares and honours type limits.
  if (values['store-loop'] && values['type-limit'])
    throw new Error('--type-limit needs the runtime: not with --store-loop');
  const usage: FeatureUsage | undefined = values.keyed
    ? 'ordering keys'
    : values['type-limit']
      ? 'type limit'
      : usageNamed(values.usage);
  const instances = Number(values.instances);
  const effect = effectNamed(values.effect);
  const dir = mkdtempSync(join(tmpdir(), 'asynccmd-profile-'));
  try {
    for (let r = 0; r < Number(values.repeats); r++) {
      const run: DrainRun = {
        total,
        concurrency,
        rounds: values.rounds,
        raw: values.raw,
        storeLoop: values['store-loop'],
        scheduled: values.scheduled,
        usage,
        instances,
        effect,
      };
      const result =
        values.db === 'sqlite'
          ? await drainSqlite(join(dir, `p${r}.db`), run)
          : values.db === 'mysql'
            ? await drainMysql(run)
            : await drainPg(run);
      console.log(
        `${values.db} C=${concurrency} ${total} commands${usageNote(usage)}: ${Math.round(result.rate)}/s, ` +
          `${result.cpuUs.toFixed(1)} µs CPU per command, peak RSS ${Math.round(process.resourceUsage().maxRSS / 1024)} MiB` +
          result.rounds,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The usage named by --usage (a bench row's usage: "fair share", "key limit", …), or undefined. */
function usageNamed(name: string | undefined): FeatureUsage | undefined {
  if (name === undefined) return undefined;
  const found = FEATURE_USAGES.find(([usage, key]) => usage === name || key === name);
  if (found === undefined)
    throw new Error(`--usage takes one of ${FEATURE_USAGES.map(([, key]) => key).join(', ')}`);
  return found[0];
}

function effectNamed(name: string | undefined): EffectMode | undefined {
  if (name === undefined || name === 'transactional' || name === 'own-transaction') return name;
  throw new Error('--effect takes transactional or own-transaction');
}

/** What the result line says of the drain's feature usage. */
function usageNote(usage: FeatureUsage | undefined): string {
  if (usage === 'ordering keys') return ` over ${ORDERING_KEYS} ordering keys`;
  if (usage === undefined) return '';
  return usage === 'type limit' ? `, type limit ${TYPE_LIMIT}` : `, ${usage}`;
}

interface ProfileResult {
  readonly rate: number;
  readonly cpuUs: number;
  readonly rounds: string;
}

/** What one drain runs: its size and the options it was given. */
interface DrainRun {
  readonly total: number;
  readonly concurrency: number;
  readonly rounds: boolean;
  readonly raw: boolean;
  /** The store's own claim/complete loop instead of the runtime (see storeLoopDrain). */
  readonly storeLoop: boolean;
  /** The bench executor runs SCHEDULED (the default mode), not ASYNC_POOL. */
  readonly scheduled: boolean;
  readonly usage: FeatureUsage | undefined;
  /** Runtimes in this process, each with its own store. */
  readonly instances: number;
  /** Each command inserts one row into EFFECT_TABLE (pg only). */
  readonly effect: EffectMode | undefined;
}

async function drainPg({ total, raw, usage, instances, effect, ...run }: DrainRun): Promise<ProfileResult> {
  const admin = pgPool(1);
  try {
    await recreateSchema(admin, SCHEMA);
    await migrateWith(() =>
      createPostgresStore({ connectionString: PG_URL, schema: SCHEMA, poolConfig: { max: 1 } }),
    );
    await admin.query(`ALTER TABLE ${rawTable(SCHEMA)} SET (autovacuum_enabled = false)`);
    const submit = usageSubmit(usage);
    if (submit === null) await seedPending(admin, rawTable(SCHEMA), BENCH_TYPE, total);
    else
      await submit(
        () => createPostgresStore({ connectionString: PG_URL, schema: SCHEMA, poolConfig: { max: 1 } }),
        1,
        total,
      );
    for (const update of usageUpdates(rawTable(SCHEMA), usage, PG_USAGE)) await admin.query(update);
    await admin.query(
      `CREATE TABLE ${SCHEMA}.${EFFECT_TABLE} (seq INT NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
    );
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
  if (effect === undefined) {
    const stores = await Promise.all(
      Array.from({ length: instances }, () => openStore({ kind: 'asynccmd-pg', schema: SCHEMA }, 4)),
    );
    return drainWith(stores, total, run, usage);
  }
  const spec = { kind: 'asynccmd-pg', schema: SCHEMA, effect } as const;
  const stores = await Promise.all(
    Array.from({ length: instances }, () => openStore(spec, storeConnections(spec, run.concurrency))),
  );
  let executed = 0;
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (done = resolve));
  const own = await effectExecutor(spec, run.concurrency, () => {
    if (++executed === total) done();
  });
  try {
    return await drain(stores, total, run.concurrency, run.rounds, usage, run.scheduled, {
      executor: own.executor,
      all,
    });
  } finally {
    await own.close();
  }
}

async function drainSqlite(
  filename: string,
  { total, raw, usage, instances, ...run }: DrainRun,
): Promise<ProfileResult> {
  await migrateWith(() => createSqliteStore({ filename }));
  const submit = usageSubmit(usage);
  if (submit !== null) await submit(() => createSqliteStore({ filename }), 1, total);
  const db = openSqlite(filename);
  if (submit === null) seedPendingSqlite(db, BENCH_TYPE, total);
  for (const update of usageUpdates(SQLITE_TABLE, usage, SQLITE_USAGE)) db.exec(update);
  if (raw) {
    try {
      return await rawDrain(total, async () => claimSqliteBatch(db, BENCH_TYPE, RAW_BATCH));
    } finally {
      db.close();
    }
  }
  db.close();
  const stores = await Promise.all(
    Array.from({ length: instances }, () => openStore({ kind: 'asynccmd-sqlite', filename }, 4)),
  );
  return drainWith(stores, total, run, usage);
}

const RAW_BATCH = 500;
const MYSQL_DATABASE = 'bench_profile';

async function drainMysql({ total, usage, instances, ...run }: DrainRun): Promise<ProfileResult> {
  const admin = mysqlPool(1);
  try {
    await recreateDatabase(admin, MYSQL_DATABASE);
  } finally {
    await admin.end();
  }
  await migrateWith(() =>
    createMysqlStore({ connection: { ...MYSQL_CONFIG, database: MYSQL_DATABASE }, connectionLimit: 1 }),
  );
  const submit = usageSubmit(usage);
  if (submit !== null)
    await submit(
      () =>
        createMysqlStore({ connection: { ...MYSQL_CONFIG, database: MYSQL_DATABASE }, connectionLimit: 1 }),
      1,
      total,
    );
  const pool = mysqlPool(1, MYSQL_DATABASE);
  try {
    if (submit === null) await seedPendingMysql(pool, BENCH_TYPE, total);
    for (const update of usageUpdates(MYSQL_TABLE, usage, MYSQL_USAGE)) await pool.query(update);
  } finally {
    await pool.end();
  }
  const stores = await Promise.all(
    Array.from({ length: instances }, () =>
      openStore({ kind: 'asynccmd-mysql', database: MYSQL_DATABASE, claimStrategy: 'skip-locked' }, 4),
    ),
  );
  return drainWith(stores, total, run, usage);
}

type OpenedStore = Awaited<ReturnType<typeof openStore>>;

/** The runtime's drain, or with --store-loop the store's own loop (one store: the first). */
async function drainWith(
  stores: readonly OpenedStore[],
  total: number,
  run: Pick<DrainRun, 'concurrency' | 'rounds' | 'storeLoop' | 'scheduled'>,
  usage: FeatureUsage | undefined,
): Promise<ProfileResult> {
  const [first] = stores;
  if (!run.storeLoop || first === undefined)
    return drain(stores, total, run.concurrency, run.rounds, usage, run.scheduled);
  const result = await rawDrain(total, () => claimStoreBatch(first));
  return { ...result, rounds: ' (store loop)' };
}

/** One claim of the store loop: claimDue of up to RAW_BATCH, completed in one complete call. */
async function claimStoreBatch(store: OpenedStore): Promise<ClaimedBatch | null> {
  const rows = await store.claimDue({
    types: [BENCH_TYPE],
    limit: RAW_BATCH,
    now: new Date(),
    token: randomUUID(),
    leaseMs: 60_000,
    instance: 'profile-drain',
  });
  if (rows.length === 0) return null;
  return {
    payloads: rows.map((row) => row.payload as BenchPayload),
    complete: async () => {
      await store.complete(rows.map((row) => ({ id: row.id, token: row.claimToken })));
    },
  };
}

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
  stores: readonly OpenedStore[],
  total: number,
  concurrency: number,
  countRounds: boolean,
  usage: FeatureUsage | undefined,
  scheduled: boolean,
  /** An executor of its own (the effect drains), and when it has run every command. */
  own?: { readonly executor: BenchExecutor; readonly all: Promise<void> },
): Promise<ProfileResult> {
  let executed = 0;
  let done: () => void = () => undefined;
  const all = own?.all ?? new Promise<void>((resolve) => (done = resolve));
  const runtimes = stores.map((store) =>
    benchRuntime(
      store,
      { concurrency },
      own?.executor ?? {
        mode: scheduled ? 'SCHEDULED' : 'ASYNC_POOL',
        onExecute: (_payload: BenchPayload) => {
          if (++executed === total) done();
        },
      },
      usageTypeLimit(usage),
      undefined,
      flowUsage(usage),
    ),
  );
  let rounds = 0;
  let claiming = 0;
  let claimed = 0;
  let lastEnd: number | null = null;
  const roundMs: number[] = [];
  const gapMs: number[] = [];
  for (const runtime of runtimes.slice(0, countRounds ? runtimes.length : 0))
    runtime.events.onKind('round', (event) => {
      rounds++;
      if (event.claimed > 0) claiming++;
      claimed += event.claimed;
      const end = performance.now();
      roundMs.push(event.durationMs);
      if (lastEnd !== null) gapMs.push(end - event.durationMs - lastEnd);
      if (runtimes.length === 1) lastEnd = end;
      if (process.env.TRACE_ROUNDS)
        console.log(
          `round ${rounds} at ${(end - t0).toFixed(1)} ms: claimed ${event.claimed} in ${event.durationMs.toFixed(1)} ms`,
        );
    });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(runtimes.map((runtime) => runtime.start()));
  await all;
  await Promise.all(runtimes.map((runtime) => runtime.stop()));
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return {
    rate: (total / ms) * 1000,
    cpuUs: (cpu.user + cpu.system) / total,
    rounds: countRounds
      ? `, ${rounds} rounds, ${(claimed / Math.max(1, claiming)).toFixed(1)} rows per claiming round, ` +
        `round ms p50/p90/max ${quantiles(roundMs)}, wait between rounds ms p50/p90/max ${quantiles(gapMs)}`
      : '',
  };
}

/** p50/p90/max of `values`, in ms with one decimal. */
function quantiles(values: number[]): string {
  if (values.length === 0) return '-';
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): string =>
    (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0).toFixed(1);
  return `${at(0.5)}/${at(0.9)}/${(sorted[sorted.length - 1] ?? 0).toFixed(1)}`;
}

main().then(
  () => process.exit(),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
