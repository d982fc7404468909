import type pg from 'pg';
import type { ExactlyOnceCounts } from '../checks.js';

/**
 * Exactly-once checks on PostgreSQL. The executions the consumers recorded are loaded into an
 * executions table (seq → runs) after the timed window, and joined to the commands in SQL: every
 * command must be SUCCESS and have run exactly once, and nothing may have run that was not enqueued.
 */

export async function loadExecutions(pool: pg.Pool, schema: string, seqs: readonly number[]): Promise<void> {
  await pool.query(`DROP TABLE IF EXISTS ${schema}.bench_exec`);
  await pool.query(`CREATE TABLE ${schema}.bench_exec (seq INT PRIMARY KEY, runs INT NOT NULL)`);
  await pool.query(
    `INSERT INTO ${schema}.bench_exec (seq, runs) SELECT s, count(*) FROM unnest($1::int[]) s GROUP BY s`,
    [seqs],
  );
}

/** For a command table with `status` and a JSON payload {seq}, rows of one type. */
export async function countCommandTable(
  pool: pg.Pool,
  schema: string,
  table: string,
  type: string,
): Promise<ExactlyOnceCounts> {
  const { rows } = await pool.query<Record<keyof ExactlyOnceCounts, string>>(
    `WITH c AS (
       SELECT status, (payload::jsonb ->> 'seq')::int AS seq FROM ${table} WHERE type = $1
     )
     SELECT
       (SELECT count(*) FROM c WHERE status = 'SUCCESS') AS finished,
       (SELECT count(*) FROM c JOIN ${schema}.bench_exec e USING (seq) WHERE e.runs = 1) AS once,
       (SELECT count(*) FROM c JOIN ${schema}.bench_exec e USING (seq) WHERE e.runs > 1) AS "twiceOrMore",
       (SELECT count(*) FROM c WHERE NOT EXISTS (SELECT 1 FROM ${schema}.bench_exec e WHERE e.seq = c.seq)) AS never,
       (SELECT count(*) FROM ${schema}.bench_exec e WHERE NOT EXISTS (SELECT 1 FROM c WHERE c.seq = e.seq)) AS strays`,
    [type],
  );
  return toCounts(rows[0]);
}

/** For a queue that deletes finished jobs (graphile-worker): seqs 1..total each ran once. */
export async function countDeletedQueue(
  pool: pg.Pool,
  schema: string,
  total: number,
  jobsLeft: number,
): Promise<ExactlyOnceCounts> {
  const { rows } = await pool.query<Record<keyof ExactlyOnceCounts, string>>(
    `SELECT
       $2::int - $3::int AS finished,
       (SELECT count(*) FROM ${schema}.bench_exec WHERE runs = 1 AND seq BETWEEN 1 AND $1) AS once,
       (SELECT count(*) FROM ${schema}.bench_exec WHERE runs > 1) AS "twiceOrMore",
       (SELECT count(*) FROM generate_series(1, $1::int) g
         WHERE NOT EXISTS (SELECT 1 FROM ${schema}.bench_exec e WHERE e.seq = g)) AS never,
       (SELECT count(*) FROM ${schema}.bench_exec WHERE seq NOT BETWEEN 1 AND $1) AS strays`,
    [total, total, jobsLeft],
  );
  return toCounts(rows[0]);
}

function toCounts(row: Record<keyof ExactlyOnceCounts, string> | undefined): ExactlyOnceCounts {
  if (!row) throw new Error('exactly-once query returned no row');
  return {
    finished: Number(row.finished),
    once: Number(row.once),
    twiceOrMore: Number(row.twiceOrMore),
    never: Number(row.never),
    strays: Number(row.strays),
  };
}
