import type mysql from 'mysql2/promise';
import { countEffects, type EffectCounts, type ExactlyOnceCounts } from '../checks.js';
import { EFFECT_TABLE } from '../protocol.js';
import { MYSQL_TABLE } from '../baselines/raw-sql-mysql.js';

/**
 * Exactly-once checks on MySQL/MariaDB, as on PostgreSQL: the recorded executions go into an
 * executions table (seq → runs) after the timed window and are joined to the commands in SQL.
 */
const commandRows = [MYSQL_TABLE, `${MYSQL_TABLE}_history`]
  .map(
    (table) =>
      `SELECT CAST(JSON_VALUE(payload, '$.seq') AS SIGNED) AS seq, status FROM ${table} WHERE type = ?`,
  )
  .join(' UNION ALL ');

export async function countMysqlExecutions(
  pool: mysql.Pool,
  type: string,
  seqs: readonly number[],
): Promise<ExactlyOnceCounts> {
  return countMysqlAgainst(pool, commandRows, [type, type], seqs);
}

/** The effect table against the statuses of asynccmd's commands of `type`. */
export async function countMysqlEffects(pool: mysql.Pool, type: string): Promise<EffectCounts> {
  const [commands] = await pool.query<mysql.RowDataPacket[]>(commandRows, [type, type]);
  const [effects] = await pool.query<mysql.RowDataPacket[]>(`SELECT seq FROM ${EFFECT_TABLE}`);
  return countEffects(
    commands.map((r) => ({ seq: Number(r['seq']), status: String(r['status']) })),
    effects.map((r) => Number(r['seq'])),
  );
}

/** Counts over `commands`, a query of (seq, status) per enqueued command, joined with the executions. */
export async function countMysqlAgainst(
  pool: mysql.Pool,
  commands: string,
  params: unknown[],
  seqs: readonly number[],
): Promise<ExactlyOnceCounts> {
  await pool.query('DROP TABLE IF EXISTS bench_exec');
  await pool.query('CREATE TABLE bench_exec (seq INT PRIMARY KEY, runs INT NOT NULL)');
  const runs = new Map<number, number>();
  for (const seq of seqs) runs.set(seq, (runs.get(seq) ?? 0) + 1);
  const rows = [...runs.entries()];
  for (let i = 0; i < rows.length; i += 5_000) {
    await pool.query('INSERT INTO bench_exec (seq, runs) VALUES ?', [rows.slice(i, i + 5_000)]);
  }
  await pool.query('DROP TABLE IF EXISTS bench_cmd');
  await pool.query(
    `CREATE TABLE bench_cmd (seq INT NOT NULL, status VARCHAR(16) NOT NULL, KEY (seq)) ${commands}`,
    params,
  );
  const [result] = await pool.query<mysql.RowDataPacket[]>(
    `SELECT
       (SELECT count(*) FROM bench_cmd) AS commands,
       (SELECT count(*) FROM bench_cmd c JOIN bench_exec e ON e.seq = c.seq
         WHERE c.status = 'SUCCESS' AND e.runs = 1) AS succeededOnce,
       (SELECT count(*) FROM bench_exec WHERE runs > 1) AS ranTwice,
       (SELECT count(*) FROM bench_cmd c
         WHERE c.status = 'SUCCESS' AND NOT EXISTS (SELECT 1 FROM bench_exec e WHERE e.seq = c.seq)) AS succeededNotRun,
       (SELECT count(*) FROM bench_cmd c JOIN bench_exec e ON e.seq = c.seq
         WHERE c.status <> 'SUCCESS' AND e.runs = 1) AS ranNotSucceeded,
       (SELECT count(*) FROM bench_cmd c
         WHERE c.status IN ('PENDING', 'WAITING') AND NOT EXISTS (SELECT 1 FROM bench_exec e WHERE e.seq = c.seq)) AS pendingNotRun,
       (SELECT count(*) FROM bench_exec e WHERE NOT EXISTS (SELECT 1 FROM bench_cmd c WHERE c.seq = e.seq)) AS strays,
       (SELECT count(*) FROM bench_cmd c WHERE c.status NOT IN ('SUCCESS', 'PENDING', 'WAITING')
         AND NOT EXISTS (SELECT 1 FROM bench_exec e WHERE e.seq = c.seq)) AS other`,
  );
  const row = result[0];
  if (!row) throw new Error('exactly-once query returned no row');
  return Object.fromEntries(
    Object.entries(row).map(([k, v]) => [k, Number(v)]),
  ) as unknown as ExactlyOnceCounts;
}
