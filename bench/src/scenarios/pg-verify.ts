import type pg from 'pg';
import { countEffects, type EffectCounts, type ExactlyOnceCounts } from '../checks.js';

/**
 * Exactly-once checks on PostgreSQL. The executions the consumers recorded are loaded into an
 * executions table (seq → runs) after the timed window, and joined to the commands in SQL.
 */

export async function loadExecutions(pool: pg.Pool, schema: string, seqs: readonly number[]): Promise<void> {
  await pool.query(`DROP TABLE IF EXISTS ${schema}.bench_exec`);
  await pool.query(`CREATE TABLE ${schema}.bench_exec (seq INT PRIMARY KEY, runs INT NOT NULL)`);
  await pool.query(
    `INSERT INTO ${schema}.bench_exec (seq, runs) SELECT s, count(*) FROM unnest($1::int[]) s GROUP BY s`,
    [seqs],
  );
}

/**
 * Counts over `commands`, a query of (seq, status) per enqueued command, fully joined with the
 * executions table.
 */
async function countAgainst(
  pool: pg.Pool,
  schema: string,
  commands: string,
  params: unknown[],
): Promise<ExactlyOnceCounts> {
  const { rows } = await pool.query<Record<keyof ExactlyOnceCounts, string>>(
    `WITH c AS (${commands}),
     j AS (SELECT c.status, c.seq AS cseq, e.seq AS eseq, e.runs
           FROM c FULL JOIN ${schema}.bench_exec e ON e.seq = c.seq)
     SELECT
       count(*) FILTER (WHERE cseq IS NOT NULL) AS commands,
       count(*) FILTER (WHERE status = 'SUCCESS' AND runs = 1) AS "succeededOnce",
       count(*) FILTER (WHERE runs > 1) AS "ranTwice",
       count(*) FILTER (WHERE status = 'SUCCESS' AND eseq IS NULL) AS "succeededNotRun",
       count(*) FILTER (WHERE runs = 1 AND cseq IS NOT NULL AND status <> 'SUCCESS') AS "ranNotSucceeded",
       count(*) FILTER (WHERE status IN ('PENDING', 'WAITING') AND eseq IS NULL) AS "pendingNotRun",
       count(*) FILTER (WHERE cseq IS NULL) AS strays,
       count(*) FILTER (WHERE cseq IS NOT NULL AND eseq IS NULL AND status NOT IN ('SUCCESS', 'PENDING', 'WAITING')) AS other
     FROM j`,
    params,
  );
  const row = rows[0];
  if (!row) throw new Error('exactly-once query returned no row');
  return Object.fromEntries(
    Object.entries(row).map(([k, v]) => [k, Number(v)]),
  ) as unknown as ExactlyOnceCounts;
}

/** A query of (seq, status) per enqueued command, with its parameters. */
export interface CommandsQuery {
  readonly sql: string;
  readonly params: unknown[];
}

/**
 * For a command table with `status` and a JSON payload {seq}: the rows of one type, with those of
 * its `history` table (where finished commands move) when there is one.
 */
export const commandTableRows = (table: string, type: string, history?: string): CommandsQuery => {
  const rows = (from: string): string =>
    `SELECT (payload::jsonb ->> 'seq')::int AS seq, status FROM ${from} WHERE type = $1`;
  return {
    sql: history === undefined ? rows(table) : `${rows(table)} UNION ALL ${rows(history)}`,
    params: [type],
  };
};

/**
 * For graphile-worker, which deletes a finished job: seq 1..total is SUCCESS when its job is gone,
 * RUNNING while locked, PENDING otherwise.
 */
export const graphileJobRows = (schema: string, total: number): CommandsQuery => ({
  sql: `SELECT g AS seq,
            CASE WHEN j.id IS NULL THEN 'SUCCESS' WHEN j.locked_at IS NULL THEN 'PENDING' ELSE 'RUNNING' END AS status
     FROM generate_series(1, $1::int) g
     LEFT JOIN ${schema}._private_jobs j ON (j.payload ->> 'seq')::int = g`,
  params: [total],
});

export function countCommandTable(
  pool: pg.Pool,
  schema: string,
  table: string,
  type: string,
  history?: string,
): Promise<ExactlyOnceCounts> {
  const q = commandTableRows(table, type, history);
  return countAgainst(pool, schema, q.sql, q.params);
}

export function countGraphileJobs(pool: pg.Pool, schema: string, total: number): Promise<ExactlyOnceCounts> {
  const q = graphileJobRows(schema, total);
  return countAgainst(pool, schema, q.sql, q.params);
}

/** The effect table `effectTable` against the commands' statuses. */
export async function countPgEffects(
  pool: pg.Pool,
  effectTable: string,
  commands: CommandsQuery,
): Promise<EffectCounts> {
  const { rows } = await pool.query<{ seq: number; status: string }>(commands.sql, commands.params);
  const effects = await pool.query<{ seq: number }>(`SELECT seq FROM ${effectTable}`);
  return countEffects(
    rows,
    effects.rows.map((r) => r.seq),
  );
}

/** For pg-boss: the bench queue's jobs, its states mapped onto the check's. */
export function countPgBossJobs(pool: pg.Pool, schema: string, queue: string): Promise<ExactlyOnceCounts> {
  return countAgainst(
    pool,
    schema,
    `SELECT (data ->> 'seq')::int AS seq,
            CASE state::text WHEN 'completed' THEN 'SUCCESS' WHEN 'created' THEN 'PENDING'
              WHEN 'retry' THEN 'PENDING' WHEN 'active' THEN 'RUNNING' ELSE upper(state::text) END AS status
     FROM ${schema}.job WHERE name = $1`,
    [queue],
  );
}
