import { createPostgresStore } from '@asynccmd/adapter-postgres';
import type pg from 'pg';
import { graphileJobsLeft, migrateGraphile, seedGraphile } from '../baselines/graphile.js';
import { rawTable, seedFinished, seedPending } from '../baselines/raw-sql-pg.js';
import { exactlyOnceVerdict } from '../checks.js';
import type { DrainTarget } from '../drain.js';
import type { LatencyTarget } from '../latency.js';
import { PG_URL, recreateSchema } from '../pg.js';
import { BENCH_TYPE, type SystemSpec } from '../protocol.js';
import type { SubmitTarget } from '../submits.js';
import { countCommandTable, countGraphileJobs, loadExecutions } from './pg-verify.js';

/**
 * The table comes from asynccmd's own migration, so the baseline writes and claims the very same
 * table, columns and indexes; only the code around the SQL differs.
 */
async function createRawTable(schema: string): Promise<void> {
  const store = createPostgresStore({ connectionString: PG_URL, schema, poolConfig: { max: 1 } });
  try {
    await store.migrate();
  } finally {
    await store.close();
  }
}

/** Schemas the PostgreSQL scenarios own; each is dropped and recreated per run. */
export const PG_SCHEMAS = {
  asynccmd: 'bench_asynccmd',
  raw: 'bench_raw',
  graphile: 'bench_graphile',
} as const;

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
): DrainTarget {
  const table = rawTable(schema);
  return {
    system,
    prepare: async (total) => {
      await recreateSchema(pool, schema);
      await createRawTable(schema);
      await seedFinished(pool, table, finishedRows);
      await seedPending(pool, table, BENCH_TYPE, total);
      await pool.query(`VACUUM ANALYZE ${table}`);
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

export function asynccmdPgTarget(pool: pg.Pool, finishedRows: number, queueSize = 0): DrainTarget {
  const schema = PG_SCHEMAS.asynccmd;
  return commandTableTarget(
    pool,
    schema,
    'asynccmd',
    { kind: 'asynccmd-pg', schema, queueSize },
    finishedRows,
  );
}

export function graphileTarget(pool: pg.Pool): DrainTarget {
  const schema = PG_SCHEMAS.graphile;
  return {
    system: 'graphile-worker',
    prepare: async (total) => {
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await migrateGraphile(schema);
      await seedGraphile(pool, schema, total);
      await pool.query(`VACUUM ANALYZE ${schema}._private_jobs`);
    },
    consumer: (concurrency) => ({ system: { kind: 'graphile', schema }, concurrency, recordStarts: false }),
    drained: async () => (await graphileJobsLeft(pool, schema)) === 0,
    verify: async (total, seqs, complete) => {
      await loadExecutions(pool, schema, seqs);
      return exactlyOnceVerdict(total, await countGraphileJobs(pool, schema, total), complete);
    },
  };
}

/** Fresh, empty asynccmd table in `schema`. */
export async function freshCommandTable(pool: pg.Pool, schema: string): Promise<void> {
  await recreateSchema(pool, schema);
  await createRawTable(schema);
}

export function rawPgSubmitTarget(pool: pg.Pool): SubmitTarget {
  const schema = PG_SCHEMAS.raw;
  return {
    system: 'raw INSERT',
    prepare: () => freshCommandTable(pool, schema),
    submitter: { kind: 'raw-pg', schema, batch: 1 },
    count: () => countRows(pool, rawTable(schema)),
  };
}

export function asynccmdPgSubmitTarget(pool: pg.Pool): SubmitTarget {
  const schema = PG_SCHEMAS.asynccmd;
  return {
    system: 'asynccmd client.submit',
    prepare: () => freshCommandTable(pool, schema),
    submitter: { kind: 'asynccmd-pg', schema },
    count: () => countRows(pool, rawTable(schema)),
  };
}

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
    prepare: async () => {
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await migrateGraphile(schema);
    },
    submitter: { kind: 'graphile', schema },
    count: () => graphileJobsLeft(pool, schema),
  };
}

export function graphileLatencyTarget(pool: pg.Pool): LatencyTarget {
  const schema = PG_SCHEMAS.graphile;
  return {
    system: 'graphile-worker (LISTEN/NOTIFY)',
    prepare: async () => {
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await migrateGraphile(schema);
    },
    consumer: { system: { kind: 'graphile', schema }, concurrency: 10, recordStarts: true },
    submitter: { kind: 'graphile', schema },
  };
}

export async function countRows(pool: pg.Pool, table: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`);
  return Number(rows[0]?.n ?? 0);
}
