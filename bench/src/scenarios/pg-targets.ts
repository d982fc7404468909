import { createPostgresStore } from '@asynccmd/adapter-postgres';
import type pg from 'pg';
import { graphileJobsLeft, migrateGraphile, seedGraphile } from '../baselines/graphile.js';
import { PGBOSS_QUEUE, pgBossJobsLeft, preparePgBoss } from '../baselines/pg-boss.js';
import { LEAN_LAYOUT } from '../baselines/layouts-pg.js';
import { historyTable, rawTable, seedFinished, seedPending } from '../baselines/raw-sql-pg.js';
import {
  flowUsage,
  PG_USAGE,
  usageSubmit,
  usageTypeLimit,
  usageUpdates,
  type FeatureUsage,
} from './usage.js';
import { effectVerdict, exactlyOnceVerdict } from '../checks.js';
import type { DrainTarget } from '../drain.js';
import type { LatencyTarget } from '../latency.js';
import { dropSchema, PG_URL, recreateSchema } from '../pg.js';
import {
  BENCH_TYPE,
  EFFECT_TABLE,
  type AsynccmdBenchMode,
  type EffectMode,
  type SystemSpec,
} from '../protocol.js';
import type { SubmitTarget } from '../submits.js';
import { migrateWith } from './migrate.js';
import {
  commandTableRows,
  countCommandTable,
  countGraphileJobs,
  countPgBossJobs,
  countPgEffects,
  graphileJobRows,
  loadExecutions,
  type CommandsQuery,
} from './pg-verify.js';

const pgStore = (schema: string) =>
  createPostgresStore({ connectionString: PG_URL, schema, poolConfig: { max: 1 } });
const createRawTable = (schema: string): Promise<void> => migrateWith(() => pgStore(schema));

/** Schemas the PostgreSQL scenarios own; each is dropped and recreated per run. */
export const PG_SCHEMAS = {
  asynccmd: 'bench_asynccmd',
  raw: 'bench_raw',
  graphile: 'bench_graphile',
  pgBoss: 'bench_pgboss',
  lean: 'bench_lean',
} as const;

/**
 * Keeps autovacuum off a table for the run: the drains run on tables the planner has no statistics
 * for, as after a fresh create or bulk load, whatever the server's autovacuum setting.
 */
async function neverAnalyze(pool: pg.Pool, table: string): Promise<void> {
  await pool.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
}

/** The effect drains' application table in `schema`: one row per run, no unique constraint. */
async function createEffectTable(pool: pg.Pool, schema: string): Promise<void> {
  await pool.query(
    `CREATE TABLE ${schema}.${EFFECT_TABLE} (seq INT NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
  );
}

/**
 * After an effect drain: the effect check on top of the exactly-once one (`exact`: one row per
 * SUCCESS is required, else reported).
 */
async function withEffectCheck(
  pool: pg.Pool,
  schema: string,
  commands: CommandsQuery,
  check: string,
  total: number,
  exact: boolean,
  complete: boolean,
): Promise<string> {
  const counts = await countPgEffects(pool, `${schema}.${EFFECT_TABLE}`, commands);
  return `${check}; ${effectVerdict(total, counts, exact, complete)}`;
}

/**
 * A drain on asynccmd's table (created by its migration) in `schema`: consumed by asynccmd's
 * runtime or by the raw-SQL loop, with `finishedRows` SUCCESS rows of history beside the work; with
 * `effect`, beside the application's effect table, checked after the drain.
 */
function commandTableTarget(
  pool: pg.Pool,
  schema: string,
  system: string,
  consumer: SystemSpec,
  finishedRows: number,
  usage?: FeatureUsage,
  effect?: EffectMode,
): DrainTarget {
  const table = rawTable(schema);
  return {
    system,
    prepare: async (total, timed) => {
      await recreateSchema(pool, schema);
      await createRawTable(schema);
      await neverAnalyze(pool, table);
      if (effect) await createEffectTable(pool, schema);
      await seedFinished(pool, schema, finishedRows);
      const submit = usageSubmit(usage);
      await seedPending(pool, table, BENCH_TYPE, submit === null ? total : total - timed);
      for (const update of usageUpdates(table, usage, PG_USAGE)) await pool.query(update);
      await submit?.(() => pgStore(schema), total - timed + 1, timed);
      await checkpoint(pool); // every system starts from one (see submits.ts)
    },
    consumer: (concurrency) => ({ system: consumer, concurrency, recordStarts: false }),
    drained: async () => {
      const { rows } = await pool.query(
        `SELECT 1 FROM ${table} WHERE type = $1 AND status IN ('WAITING', 'PENDING', 'RUNNING') LIMIT 1`,
        [BENCH_TYPE],
      );
      return rows.length === 0;
    },
    verify: async (total, seqs, complete) => {
      await loadExecutions(pool, schema, seqs);
      const check = exactlyOnceVerdict(
        total,
        await countCommandTable(pool, schema, table, BENCH_TYPE, historyTable(schema)),
        complete,
      );
      if (!effect) return check;
      const commands = commandTableRows(table, BENCH_TYPE, historyTable(schema));
      return withEffectCheck(pool, schema, commands, check, total, effect === 'transactional', complete);
    },
  };
}

export function rawPgTarget(pool: pg.Pool, finishedRows: number, batch: number): DrainTarget {
  const schema = PG_SCHEMAS.raw;
  return commandTableTarget(pool, schema, 'raw SQL loop', { kind: 'raw-pg', schema, batch }, finishedRows);
}

/** The raw-SQL reference of the transactional effect drain (baselines/raw-effect-pg.ts). */
export function rawPgEffectTarget(pool: pg.Pool, batch: number): DrainTarget {
  const schema = PG_SCHEMAS.raw;
  return commandTableTarget(
    pool,
    schema,
    'raw SQL loop',
    { kind: 'raw-pg', schema, batch, effect: 'transactional' },
    0,
    undefined,
    'transactional',
  );
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
    {
      kind: 'asynccmd-pg',
      schema,
      queueSize,
      typeLimit: usageTypeLimit(usage),
      flow: flowUsage(usage),
      mode,
    },
    finishedRows,
    usage,
  );
}

/** asynccmd's drain where each command inserts one row into the effect table (see EffectMode). */
export function asynccmdPgEffectTarget(
  pool: pg.Pool,
  effect: EffectMode,
  transactionGroupMs?: number,
): DrainTarget {
  const schema = PG_SCHEMAS.asynccmd;
  return commandTableTarget(
    pool,
    schema,
    'asynccmd',
    {
      kind: 'asynccmd-pg',
      schema,
      effect,
      ...(transactionGroupMs === undefined ? {} : { transactionGroupMs }),
    },
    0,
    undefined,
    effect,
  );
}

/**
 * The lean bare loop's drain (baselines/layouts-pg.ts): a narrow table with one claim index,
 * batches of `batch` claimed while the previous one completes. Not asynccmd's table: the physical
 * reference a layout change can reach for.
 */
export function leanPgTarget(pool: pg.Pool, batch: number): DrainTarget {
  const schema = PG_SCHEMAS.lean;
  const table = `${schema}.lean`;
  return {
    system: 'lean bare loop',
    prepare: async (total) => {
      await recreateSchema(pool, schema);
      await LEAN_LAYOUT.create(pool, schema, async () => undefined);
      await neverAnalyze(pool, table);
      await LEAN_LAYOUT.seed(pool, schema, total);
      await checkpoint(pool);
    },
    consumer: (concurrency) => ({
      system: { kind: 'lean-pg', schema, batch },
      concurrency,
      recordStarts: false,
    }),
    drained: async () => {
      const { rows } = await pool.query(
        `SELECT 1 FROM ${table} WHERE status IN ('PENDING', 'RUNNING') LIMIT 1`,
      );
      return rows.length === 0;
    },
    verify: async (total, seqs, complete) => {
      await loadExecutions(pool, schema, seqs);
      return exactlyOnceVerdict(total, await countCommandTable(pool, schema, table, BENCH_TYPE), complete);
    },
  };
}

/** graphile-worker's drain; with `effect`, its task inserts one row into the effect table. */
export function graphileTarget(pool: pg.Pool, performance: boolean, effect = false): DrainTarget {
  const schema = PG_SCHEMAS.graphile;
  return {
    system: 'graphile-worker',
    prepare: async (total) => {
      await freshGraphile(pool);
      await neverAnalyze(pool, `${schema}._private_jobs`);
      if (effect) await createEffectTable(pool, schema);
      await seedGraphile(pool, schema, total);
      await checkpoint(pool);
    },
    consumer: (concurrency) => ({
      system: { kind: 'graphile', schema, performance, effect },
      concurrency,
      recordStarts: false,
    }),
    drained: async () => (await graphileJobsLeft(pool, schema)) === 0,
    verify: async (total, seqs, complete) => {
      await loadExecutions(pool, schema, seqs);
      const check = exactlyOnceVerdict(total, await countGraphileJobs(pool, schema, total), complete);
      if (!effect) return check;
      return withEffectCheck(pool, schema, graphileJobRows(schema, total), check, total, false, complete);
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
