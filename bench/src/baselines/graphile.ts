import { Logger, makeWorkerUtils, run, type Runner } from 'graphile-worker';
import type pg from 'pg';
import { PG_URL } from '../pg.js';
import { EFFECT_TABLE, type BenchPayload } from '../protocol.js';

/**
 * The graphile-worker baseline: its own schema, its `add_job`/`add_jobs` SQL functions to enqueue,
 * its `run()` with a no-op task to consume — with its defaults, or with the batching settings its
 * Performance page recommends for throughput.
 */

export const GRAPHILE_TASK = 'noop';

const silent = new Logger(() => () => undefined);

/** Installs graphile-worker's schema afresh (the caller dropped the old one). */
export async function migrateGraphile(schema: string): Promise<void> {
  const utils = await makeWorkerUtils({ connectionString: PG_URL, schema, logger: silent });
  try {
    await utils.migrate();
  } finally {
    await utils.release();
  }
}

/** Enqueues `count` jobs in one `add_jobs` call, payload {seq}. */
export async function seedGraphile(
  pool: pg.Pool,
  schema: string,
  count: number,
  firstSeq = 1,
): Promise<void> {
  await pool.query(
    `SELECT count(*) FROM ${schema}.add_jobs((
       SELECT array_agg(($1::text, json_build_object('seq', g), NULL, NULL, NULL, NULL, NULL, NULL)::${schema}.job_spec)
       FROM generate_series($2::int, $3::int) g))`,
    [GRAPHILE_TASK, firstSeq, firstSeq + count - 1],
  );
}

/** Jobs still in graphile's table: a finished job is deleted, so a drained queue has none. */
export async function graphileJobsLeft(pool: pg.Pool, schema: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${schema}._private_jobs`);
  return Number(rows[0]?.n ?? 0);
}

/** One job, the way an application enqueues inside its transaction: `SELECT add_job(…)`. */
export async function addJobInTx(
  client: pg.PoolClient,
  schema: string,
  payload: BenchPayload,
): Promise<void> {
  await client.query(`SELECT ${schema}.add_job($1, $2::json)`, [GRAPHILE_TASK, JSON.stringify(payload)]);
}

/** Jobs in one `add_jobs` call (its batch enqueue), inside the caller's transaction. */
export async function addJobsInTx(
  client: pg.PoolClient,
  schema: string,
  payloads: readonly BenchPayload[],
): Promise<void> {
  await client.query(
    `SELECT count(*) FROM ${schema}.add_jobs((
       SELECT array_agg(($1::text, p, NULL, NULL, NULL, NULL, NULL, NULL)::${schema}.job_spec)
       FROM json_array_elements($2::json) p))`,
    [GRAPHILE_TASK, JSON.stringify(payloads)],
  );
}

/**
 * The worker settings graphile-worker's Performance page runs its figures with: jobs fetched 500 at
 * a time into a local queue, completions and failures batched without delay.
 */
export const GRAPHILE_PERFORMANCE = {
  localQueue: { size: 500 },
  completeJobBatchDelay: 0,
  failJobBatchDelay: 0,
} as const;

export function graphileSettings(performance: boolean): string {
  const pool = 'concurrency C, maxPoolSize C + 1';
  return performance
    ? `${pool}, preset.worker localQueue.size 500, completeJobBatchDelay 0, failJobBatchDelay 0 (its Performance page)`
    : `${pool}, everything else default (no local queue, unbatched completion)`;
}

/**
 * Runs graphile-worker with a no-op task, or (`effect`) one that inserts one row into the effect
 * table through `helpers.query` (on its pool, autocommitted: its own transaction, before the job's
 * completion); `stop()` shuts it down gracefully.
 */
export async function runGraphile(
  schema: string,
  concurrency: number,
  performance: boolean,
  onExecute: (payload: BenchPayload) => void,
  effect = false,
): Promise<Runner> {
  const insert = `INSERT INTO ${schema}.${EFFECT_TABLE} (seq) VALUES ($1)`;
  return run({
    connectionString: PG_URL,
    schema,
    concurrency,
    maxPoolSize: concurrency + 1,
    noHandleSignals: true,
    logger: silent,
    ...(performance ? { preset: { worker: GRAPHILE_PERFORMANCE } } : {}),
    taskList: {
      [GRAPHILE_TASK]: effect
        ? async (payload, helpers) => {
            await helpers.query(insert, [(payload as BenchPayload).seq]);
            onExecute(payload as BenchPayload);
          }
        : (payload) => {
            onExecute(payload as BenchPayload);
          },
    },
  });
}
