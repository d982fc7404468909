import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { createPostgresStore } from '@asynccmd/adapter-postgres';
import type pg from 'pg';
import { BackendSampler } from './backend-cpu.js';
import { graphileJobsLeft, migrateGraphile, runGraphile, seedGraphile } from './baselines/graphile.js';
import { PG_LAYOUTS, type Claimed, type PgLayout } from './baselines/layouts-pg.js';
import { pgPool, PG_URL, pgVersion, recreateSchema, usePgUrl } from './pg.js';
import { migrateWith } from './scenarios/migrate.js';
import { startTempPostgres } from './soak/temp-pg.js';
import { repeated } from './stats.js';
import { peer } from './versions.js';

const USAGE = `node bench/dist/layout-loops.js [--total N] [--rounds R] [--batch B] [--layouts k1,k2]
    [--no-graphile] [--heartbeats H]
  Drains N pre-inserted commands with a bare loop on each candidate table layout (baselines/
  layouts-pg.ts: lean, today, adapter-history, hot-history, hot-partitioned, hot-lean-lease,
  hot-chosen) and
  graphile-worker ${peer('graphile-worker')} (C=10, local queue 500), interleaved R times in
  rotating order, on a PostgreSQL server the tool starts itself (initdb defaults, autovacuum off so
  no worker writes into the figures, pg_stat_statements preloaded, pg_walinspect). The loop: claim
  B (500) rows, complete them in one statement while the next claim runs on the second connection.
  Per command it prints what depends little on how loaded the machine is: WAL bytes and records
  (pg_walinspect over the drain's LSN range: heap inserts, updates, HOT updates, deletes, btree
  index entries), shared buffers touched and dirtied (pg_stat_statements), the run time of the
  loop's backends (/proc/<pid>/schedstat), the table + index bytes left, and the WAL and index
  entries of the pre-insert; jobs/s beside them. Then a heartbeat probe: B claimed rows get H lease
  extensions each: WAL per row-heartbeat, and the share of HOT updates.`;

const LOOP_APP = 'asynccmd-layout-loop';
const GRAPHILE_KEY = 'graphile';

interface Figures {
  readonly jobsPerS: number;
  readonly cpuUs: number;
  readonly walBytes: number;
  readonly fpiBytes: number;
  readonly walRecords: number;
  readonly heapInsert: number;
  readonly heapUpdate: number;
  readonly heapHot: number;
  readonly heapDelete: number;
  readonly heapLock: number;
  readonly indexEntries: number;
  readonly indexSplits: number;
  readonly buffersHit: number;
  readonly buffersDirtied: number;
  readonly bytesLeft: number;
  readonly heartbeatWal: number;
  readonly heartbeatHot: number;
  readonly insertWal: number;
  readonly insertIndexEntries: number;
}

type Counts = Map<string, { count: number; bytes: number; fpi: number }>;

async function walBetween(admin: pg.Pool, from: string, to: string): Promise<Counts> {
  // pg_walinspect reads only WAL already flushed: wait for the wal writer to pass `to`.
  for (;;) {
    const { rows } = await admin.query<{ ok: boolean }>(
      'SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn AS ok',
      [to],
    );
    if (rows[0]?.ok === true) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const { rows } = await admin.query<{ kind: string; count: string; bytes: string; fpi: string }>(
    `SELECT "resource_manager/record_type" AS kind, count, combined_size AS bytes, fpi_size AS fpi
     FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true)`,
    [from, to],
  );
  return new Map(
    rows.map((r) => [r.kind, { count: Number(r.count), bytes: Number(r.bytes), fpi: Number(r.fpi) }]),
  );
}

const sum = (counts: Counts, pick: (kind: string) => boolean, field: 'count' | 'bytes' | 'fpi'): number =>
  [...counts].filter(([kind]) => pick(kind)).reduce((a, [, c]) => a + c[field], 0);

/** Btree tuples written: leaf inserts, and the new tuple a page split carries. */
const indexEntries = (wal: Counts): number =>
  sum(wal, (k) => /^Btree\/(INSERT_LEAF|INSERT_POST|SPLIT_L|SPLIT_R)$/.test(k), 'count');

async function lsn(admin: pg.Pool): Promise<string> {
  const { rows } = await admin.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
  return rows[0]!.lsn;
}

async function statementBuffers(admin: pg.Pool, schema: string): Promise<{ hit: number; dirtied: number }> {
  const { rows } = await admin.query<{ hit: string; dirtied: string }>(
    `SELECT coalesce(sum(shared_blks_hit + shared_blks_read), 0) AS hit,
            coalesce(sum(shared_blks_dirtied), 0) AS dirtied
     FROM pg_stat_statements WHERE query LIKE '%' || $1 || '%'`,
    [schema],
  );
  return { hit: Number(rows[0]?.hit ?? 0), dirtied: Number(rows[0]?.dirtied ?? 0) };
}

async function bytesOf(admin: pg.Pool, schema: string): Promise<number> {
  const { rows } = await admin.query<{ bytes: string }>(
    `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) AS bytes
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')`,
    [schema],
  );
  return Number(rows[0]?.bytes ?? 0);
}

/**
 * The bare loop: claim a batch, then complete it while the next claim runs (two connections), until
 * a claim comes back empty.
 */
async function drainLoop(pool: pg.Pool, layout: PgLayout, schema: string, batch: number): Promise<number> {
  const claimNext = async (): Promise<Claimed> => {
    const token = randomUUID();
    return { ids: (await layout.claim(pool, schema, batch, token)).map((r) => r.id), token };
  };
  let done = 0;
  let claimed = await claimNext();
  while (claimed.ids.length > 0) {
    const finishing = claimed;
    const [, next] = await Promise.all([layout.complete(pool, schema, finishing), claimNext()]);
    done += finishing.ids.length;
    claimed = next;
  }
  return done;
}

async function measure(
  admin: pg.Pool,
  schema: string,
  total: number,
  run: () => Promise<void>,
): Promise<Omit<Figures, 'heartbeatWal' | 'heartbeatHot' | 'insertWal' | 'insertIndexEntries'>> {
  await admin.query('CHECKPOINT');
  await admin.query('SELECT pg_stat_statements_reset()');
  const sampler = new BackendSampler(admin, LOOP_APP);
  const from = await lsn(admin);
  await sampler.start();
  const t0 = performance.now();
  await run();
  const ms = performance.now() - t0;
  const cpu = await sampler.stop();
  const to = await lsn(admin);
  const wal = await walBetween(admin, from, to);
  const buffers = await statementBuffers(admin, schema);
  const per = (n: number): number => n / total;
  const heap = (record: string): number =>
    per(sum(wal, (k) => k === `Heap/${record}` || k === `Heap/${record}+INIT`, 'count'));
  return {
    jobsPerS: (total / ms) * 1000,
    cpuUs: per(cpu.runUs),
    walBytes: per(sum(wal, () => true, 'bytes')),
    fpiBytes: per(sum(wal, () => true, 'fpi')),
    walRecords: per(sum(wal, () => true, 'count')),
    heapInsert: heap('INSERT'),
    heapUpdate: heap('UPDATE'),
    heapHot: heap('HOT_UPDATE'),
    heapDelete: heap('DELETE'),
    heapLock: heap('LOCK'),
    indexEntries: per(indexEntries(wal)),
    indexSplits: per(sum(wal, (k) => /^Btree\/(SPLIT_L|SPLIT_R|NEWROOT)$/.test(k), 'count')),
    buffersHit: per(buffers.hit),
    buffersDirtied: per(buffers.dirtied),
    bytesLeft: per(await bytesOf(admin, schema)),
  };
}

/** `heartbeats` lease extensions of `batch` claimed rows: WAL bytes per row-heartbeat, HOT share. */
async function heartbeatProbe(
  admin: pg.Pool,
  pool: pg.Pool,
  layout: PgLayout,
  schema: string,
  batch: number,
  heartbeats: number,
): Promise<{ wal: number; hot: number }> {
  await layout.seed(admin, schema, batch);
  const token = randomUUID();
  const claimed = { ids: (await layout.claim(pool, schema, batch, token)).map((r) => r.id), token };
  await admin.query('CHECKPOINT');
  const from = await lsn(admin);
  for (let i = 0; i < heartbeats; i++) await layout.heartbeat(pool, schema, claimed);
  const wal = await walBetween(admin, from, await lsn(admin));
  await layout.complete(pool, schema, claimed);
  const beats = claimed.ids.length * heartbeats;
  const updates = sum(wal, (k) => /^Heap\/(HOT_)?UPDATE/.test(k), 'count');
  return {
    wal: sum(wal, () => true, 'bytes') / beats,
    hot: updates > 0 ? sum(wal, (k) => k.startsWith('Heap/HOT_UPDATE'), 'count') / updates : Number.NaN,
  };
}

async function runLayout(
  admin: pg.Pool,
  layout: PgLayout,
  total: number,
  batch: number,
  heartbeats: number,
): Promise<Figures> {
  const schema = `layout_${layout.key.replaceAll('-', '_')}`;
  await recreateSchema(admin, schema);
  await layout.create(admin, schema, () =>
    migrateWith(() => createPostgresStore({ connectionString: PG_URL, schema, poolConfig: { max: 1 } })),
  );
  await admin.query('CHECKPOINT');
  const seeded = await lsn(admin);
  await layout.seed(admin, schema, total);
  const insert = await walBetween(admin, seeded, await lsn(admin));
  const pool = pgPool(2, true);
  try {
    await Promise.all([pool.query('SELECT pg_sleep(0.01)'), pool.query('SELECT pg_sleep(0.01)')]);
    const figures = await measure(admin, schema, total, async () => {
      const done = await drainLoop(pool, layout, schema, batch);
      if (done !== total) throw new Error(`${layout.key}: drained ${done} of ${total}`);
    });
    const beat = await heartbeatProbe(admin, pool, layout, schema, batch, heartbeats);
    return {
      ...figures,
      heartbeatWal: beat.wal,
      heartbeatHot: beat.hot,
      insertWal: sum(insert, () => true, 'bytes') / total,
      insertIndexEntries: indexEntries(insert) / total,
    };
  } finally {
    await pool.end();
  }
}

async function runGraphileReference(admin: pg.Pool, total: number): Promise<Figures> {
  const schema = 'layout_graphile';
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await migrateGraphile(schema);
  await admin.query('CHECKPOINT');
  const seeded = await lsn(admin);
  await seedGraphile(admin, schema, total);
  const insert = await walBetween(admin, seeded, await lsn(admin));
  let executed = 0;
  const figures = await measure(admin, schema, total, async () => {
    const runner = await runGraphile(schema, 10, true, () => void executed++);
    while ((await graphileJobsLeft(admin, schema)) > 0) await new Promise((r) => setTimeout(r, 5));
    await runner.stop();
  });
  if (executed < total) throw new Error(`graphile-worker ran ${executed} of ${total}`);
  return {
    ...figures,
    heartbeatWal: Number.NaN,
    heartbeatHot: Number.NaN,
    insertWal: sum(insert, () => true, 'bytes') / total,
    insertIndexEntries: indexEntries(insert) / total,
  };
}

const COLUMNS: readonly [keyof Figures, string, number][] = [
  ['jobsPerS', 'jobs/s', 0],
  ['cpuUs', 'server CPU µs', 1],
  ['walBytes', 'WAL B', 0],
  ['fpiBytes', 'of it FPI B', 0],
  ['walRecords', 'WAL records', 2],
  ['heapInsert', 'heap ins', 2],
  ['heapUpdate', 'heap upd', 2],
  ['heapHot', 'heap HOT upd', 2],
  ['heapDelete', 'heap del', 2],
  ['heapLock', 'heap lock', 2],
  ['indexEntries', 'index entries', 2],
  ['indexSplits', 'index page splits', 3],
  ['buffersHit', 'buffers', 1],
  ['buffersDirtied', 'buffers dirtied', 2],
  ['bytesLeft', 'table+index B left', 0],
  ['insertWal', 'insert WAL B', 0],
  ['insertIndexEntries', 'insert index entries', 2],
  ['heartbeatWal', 'heartbeat WAL B', 0],
  ['heartbeatHot', 'heartbeat HOT share', 2],
];

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      total: { type: 'string', default: '20000' },
      rounds: { type: 'string', default: '3' },
      batch: { type: 'string', default: '500' },
      heartbeats: { type: 'string', default: '5' },
      layouts: { type: 'string' },
      'no-graphile': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return console.log(USAGE);
  const total = Number(values.total);
  const batch = Number(values.batch);
  const heartbeats = Number(values.heartbeats);
  const wanted = values.layouts?.split(',');
  const layouts = PG_LAYOUTS.filter((l) => wanted === undefined || wanted.includes(l.key));
  const server = await startTempPostgres({
    autovacuum: false,
    settings: ['shared_preload_libraries=pg_stat_statements', 'max_wal_size=8GB', 'checkpoint_timeout=1h'],
  });
  usePgUrl(server.url);
  const admin = pgPool(2);
  try {
    await admin.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
    await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    // Every connection opened from here on (the loops', graphile-worker's) carries this name.
    process.env['PGAPPNAME'] = LOOP_APP;
    console.log(
      `${new Date().toISOString()} ${await pgVersion(admin)}; ${server.settings}, pg_stat_statements, ` +
        `max_wal_size 8GB; ${total} commands per drain, batch ${batch}, ${values.rounds} rounds`,
    );
    const entries: [string, () => Promise<Figures>][] = [
      ...layouts.map((l): [string, () => Promise<Figures>] => [
        l.key,
        () => runLayout(admin, l, total, batch, heartbeats),
      ]),
      ...(values['no-graphile']
        ? []
        : [[GRAPHILE_KEY, () => runGraphileReference(admin, total)] as [string, () => Promise<Figures>]]),
    ];
    const results = new Map<string, Figures[]>(entries.map(([key]) => [key, []]));
    for (let round = 0; round < Number(values.rounds); round++) {
      // Rotated: no layout always runs first, or always right after the same other one.
      for (let i = 0; i < entries.length; i++) {
        const [key, run] = entries[(i + round) % entries.length]!;
        const f = await run();
        results.get(key)!.push(f);
        console.log(
          `round ${round + 1} ${key}: ` +
            COLUMNS.map(([k, label, d]) => `${label} ${f[k].toFixed(d)}`).join(', '),
        );
      }
    }
    console.log(`\nmedians per command (${values.rounds} rounds):\n`);
    console.log(`| layout | ${COLUMNS.map(([, label]) => label).join(' | ')} |`);
    console.log(`|---|${COLUMNS.map(() => '---:').join('|')}|`);
    for (const [key, runs] of results) {
      const cells = COLUMNS.map(([k, , d]) => {
        const m = repeated(runs.map((f) => f[k])).median;
        return Number.isFinite(m) ? m.toFixed(d) : '—';
      });
      console.log(`| ${key} | ${cells.join(' | ')} |`);
    }
    console.log('');
    for (const l of layouts) console.log(`- ${l.key}: ${l.description}`);
  } finally {
    await admin.end();
    server.stop();
  }
}

main().then(
  () => process.exit(),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
