import { createPostgresStore } from '@asynccmd/adapter-postgres';
import type pg from 'pg';
import { graphileJobsLeft, migrateGraphile, seedGraphile } from '../baselines/graphile.js';
import { PGBOSS_QUEUE, pgBossJobsLeft, preparePgBoss } from '../baselines/pg-boss.js';
import { rawTable, seedFinished, seedPending } from '../baselines/raw-sql-pg.js';
import { usageTypeLimit, usageUpdate, type FeatureUsage } from './usage.js';
import { exactlyOnceVerdict } from '../checks.js';
import type { DrainTarget } from '../drain.js';
import type { LatencyTarget } from '../latency.js';
import { dropSchema, PG_URL, recreateSchema } from '../pg.js';
import { BENCH_TYPE, type AsynccmdBenchMode, type SystemSpec } from '../protocol.js';
import type { SubmitTarget } from '../submits.js';
import { migrateWith } from './migrate.js';
import { countCommandTable, countGraphileJobs, countPgBossJobs, loadExecutions } from './pg-verify.js';

const createRawTable = (schema: string): Promise<void> =>
  migrateWith(() => createPostgresStore({ connectionString: PG_URL, schema, poolConfig: { max: 1 } }));

/** Schemas the PostgreSQL scenarios own; each is dropped and recreated per run. */
export const PG_SCHEMAS = {
  asynccmd: 'bench_asynccmd',
  raw: 'bench_raw',
  graphile: 'bench_graphile',
  pgBoss: 'bench_pgboss',
} as const;

/**
 * Keeps autovacuum off a table for the run: the drains run on tables the planner has no statistics
 * for, as after a fresh create or bulk load, whatever the server's autovacuum setting.
 */
async function neverAnalyze(pool: pg.Pool, table: string): Promise<void> {
  await pool.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
}

/**
 * A drain on asynccmd's table (created by its migration) in `schema`: consumed by asynccmd's
 * runtime or by the raw-SQL loop, with `finishedRows` SUCCESS rows of history beside the work.
 */
function commandTableTarget(
  pool: pg.Pool,
  schema: string,
  system: string,
  consumer: SystemSpec,
  finishedRows: number,
  usage?: FeatureUsage,
): DrainTarget {
  const table = rawTable(schema);
  return {
    system,
    prepare: async (total) => {
      await recreateSchema(pool, schema);
      await createRawTable(schema);
      await neverAnalyze(pool, table);
      await seedFinished(pool, table, finishedRows);
      await seedPending(pool, table, BENCH_TYPE, total);
      const update = usageUpdate(table, usage, (a, b) => `${a} || (${b})::text`);
      if (update) await pool.query(update);
      await checkpoint(pool); // every system starts from one (see submits.ts)
    },
    consumer: (concurrency) => ({ system: consumer, concurrency, recordStarts: false }),
    drained: async () => {
      const { rows } = await pool.query(
        `SELECT 1 FROM ${table} WHERE type = $1 AND status IN ('PENDING', 'RUNNING') LIMIT 1`,
        [BENCH_TYPE],
      );
      return rows.length === 0;
    },
    verify: async (total, seqs, complete) => {
      await loadExecutions(pool, schema, seqs);
      return exactlyOnceVerdict(total, await countCommandTable(pool, schema, table, BENCH_TYPE), complete);
    },
  };
}

export function rawPgTarget(pool: pg.Pool, finishedRows: number, batch: number): DrainTarget {
  const schema = PG_SCHEMAS.raw;
  return commandTableTarget(pool, schema, 'raw SQL loop', { kind: 'raw-pg', schema, batch }, finishedRows);
}

export function asynccmdPgTarget(
  pool: pg.Pool,
  finishedRows: number,
  queueSize?: number,
  usage?: FeatureUsage,
  mode?: AsynccmdBenchMode,
): DrainTarget {
  const schema = PG_SCHEMAS.asynccmd;
  return commandTableTarget(
    pool,
    schema,
    'asynccmd',
    { kind: 'asynccmd-pg', schema, queueSize, typeLimit: usageTypeLimit(usage), mode },
    finishedRows,
    usage,
  );
}

export function graphileTarget(pool: pg.Pool, performance: boolean): DrainTarget {
  const schema = PG_SCHEMAS.graphile;
  return {
    system: 'graphile-worker',
    prepare: async (total) => {
      await freshGraphile(pool);
      await neverAnalyze(pool, `${schema}._private_jobs`);
      await seedGraphile(pool, schema, total);
      await checkpoint(pool);
    },
    consumer: (concurrency) => ({
      system: { kind: 'graphile', schema, performance },
      concurrency,
      recordStarts: false,
    }),
    drained: async () => (await graphileJobsLeft(pool, schema)) === 0,
    verify: async (total, seqs, complete) => {
      await loadExecutions(pool, schema, seqs);
      return exactlyOnceVerdict(total, await countGraphileJobs(pool, schema, total), complete);
    },
  };
}

export function pgBossTarget(pool: pg.Pool, batchSize: number): DrainTarget {
  const schema = PG_SCHEMAS.pgBoss;
  return {
    system: 'pg-boss',
    prepare: async (total) => {
      await dropSchema(pool, schema);
      await preparePgBoss(schema, total);
      await checkpoint(pool);
    },
    consumer: (concurrency) => ({
      system: { kind: 'pg-boss', schema, batchSize },
      concurrency,
      recordStarts: false,
    }),
    drained: async () => (await pgBossJobsLeft(pool, schema)) === 0,
    verify: async (total, seqs, complete) => {
      await loadExecutions(pool, schema, seqs);
      return exactlyOnceVerdict(total, await countPgBossJobs(pool, schema, PGBOSS_QUEUE), complete);
    },
  };
}

/** Fresh, empty asynccmd table in `schema`. */
export async function freshCommandTable(pool: pg.Pool, schema: string): Promise<void> {
  await recreateSchema(pool, schema);
  await createRawTable(schema);
}

/** Submits into a fresh asynccmd table, by asynccmd's client or by a plain INSERT of the same row. */
function commandTableSubmitTarget(
  pool: pg.Pool,
  system: string,
  submitter: SystemSpec & { schema: string },
): SubmitTarget {
  return {
    system,
    prepare: () => freshCommandTable(pool, submitter.schema),
    submitter,
    count: () => countRows(pool, rawTable(submitter.schema)),
    checkpoint: () => checkpoint(pool),
  };
}

export const rawPgSubmitTarget = (pool: pg.Pool): SubmitTarget =>
  commandTableSubmitTarget(pool, 'raw INSERT', { kind: 'raw-pg', schema: PG_SCHEMAS.raw, batch: 1 });

export const oneRoundTripSubmitTarget = (pool: pg.Pool): SubmitTarget =>
  commandTableSubmitTarget(pool, 'one-round-trip INSERT', {
    kind: 'raw-pg',
    schema: PG_SCHEMAS.raw,
    batch: 1,
    oneRoundTrip: true,
  });

export const asynccmdPgSubmitTarget = (pool: pg.Pool): SubmitTarget =>
  commandTableSubmitTarget(pool, 'asynccmd client.submit', {
    kind: 'asynccmd-pg',
    schema: PG_SCHEMAS.asynccmd,
  });

export function asynccmdPgLatencyTarget(pool: pg.Pool): LatencyTarget {
  const schema = PG_SCHEMAS.asynccmd;
  return {
    system: 'asynccmd (coalesced NOTIFY)',
    prepare: () => freshCommandTable(pool, schema),
    consumer: { system: { kind: 'asynccmd-pg', schema }, concurrency: 10, recordStarts: true },
    submitter: { kind: 'asynccmd-pg', schema },
  };
}

export function graphileSubmitTarget(pool: pg.Pool): SubmitTarget {
  const schema = PG_SCHEMAS.graphile;
  return {
    system: 'graphile-worker add_job',
    prepare: () => freshGraphile(pool),
    submitter: { kind: 'graphile', schema, performance: false },
    count: () => graphileJobsLeft(pool, schema),
    checkpoint: () => checkpoint(pool),
  };
}

async function checkpoint(pool: pg.Pool): Promise<void> {
  await pool.query('CHECKPOINT');
}

export function graphileLatencyTarget(pool: pg.Pool): LatencyTarget {
  const schema = PG_SCHEMAS.graphile;
  return {
    system: 'graphile-worker (LISTEN/NOTIFY)',
    prepare: () => freshGraphile(pool),
    consumer: {
      system: { kind: 'graphile', schema, performance: true },
      concurrency: 10,
      recordStarts: true,
    },
    submitter: { kind: 'graphile', schema, performance: true },
  };
}

/** graphile-worker's schema dropped and installed afresh, empty. */
async function freshGraphile(pool: pg.Pool): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS ${PG_SCHEMAS.graphile} CASCADE`);
  await migrateGraphile(PG_SCHEMAS.graphile);
}

export async function countRows(pool: pg.Pool, table: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`);
  return Number(rows[0]?.n ?? 0);
}
