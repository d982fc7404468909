import type mysql from 'mysql2/promise';
import { Sidequest } from 'sidequest';
import { MYSQL_CONFIG } from '../mysql.js';
import type { BenchPayload } from '../protocol.js';
import { ensureDigits } from './raw-sql-mysql.js';
import { BenchNoopJob, onBenchJob } from './sidequest-job.js';

/**
 * The Sidequest baseline on MySQL/MariaDB: its own tables (its migrations), jobs enqueued with
 * `Sidequest.build(…).enqueue`, run in the consumer's own process (`fork: false`, inline runner)
 * with the dispatcher polling every `pollMs`.
 */

export const SIDEQUEST_QUEUE = 'bench';
export const SIDEQUEST_TABLE = 'sidequest_jobs';

function backend(database: string): { driver: '@sidequest/mysql-backend'; config: string } {
  const { user, password, host, port } = MYSQL_CONFIG;
  const auth =
    password === ''
      ? encodeURIComponent(user)
      : `${encodeURIComponent(user)}:${encodeURIComponent(password)}`;
  return { driver: '@sidequest/mysql-backend', config: `mysql://${auth}@${host}:${port}/${database}` };
}

function engineConfig(database: string, concurrency: number, pollMs: number, migrate: boolean) {
  return {
    backend: backend(database),
    queues: [{ name: SIDEQUEST_QUEUE, concurrency }],
    maxConcurrentJobs: concurrency,
    runner: 'inline' as const,
    fork: false,
    jobPollingInterval: pollMs,
    gracefulShutdown: false,
    skipMigration: !migrate,
    logger: { level: 'error' as const, json: false },
  };
}

/**
 * Runs Sidequest's migrations in `database` (the caller created it empty), enqueues job seq 1
 * through its API, and copies that row for seq 2..count in one INSERT … SELECT: a bulk load of
 * rows exactly as Sidequest writes them, without 20,000 enqueue round trips.
 */
export async function prepareSidequest(pool: mysql.Pool, database: string, count: number): Promise<void> {
  await Sidequest.configure(engineConfig(database, 1, 50, true));
  try {
    if (count >= 1) await Sidequest.build(BenchNoopJob).queue(SIDEQUEST_QUEUE).enqueue({ seq: 1 });
  } finally {
    await Sidequest.stop();
  }
  if (count <= 1) return;
  await ensureDigits(pool);
  const [cols] = await pool.query<mysql.RowDataPacket[]>(
    `SELECT column_name AS c FROM information_schema.columns
     WHERE table_schema = ? AND table_name = ? AND column_name NOT IN ('id', 'args')`,
    [database, SIDEQUEST_TABLE],
  );
  const names = cols.map((r) => `\`${String(r['c'])}\``).join(', ');
  const [first] = await pool.query<mysql.RowDataPacket[]>(
    `SELECT id, CAST(args AS CHAR) AS args FROM ${SIDEQUEST_TABLE}`,
  );
  const template = first[0];
  if (first.length !== 1 || !template) throw new Error(`expected one Sidequest job, found ${first.length}`);
  const args = String(template['args']);
  const seqOne = JSON.stringify({ seq: 1 });
  if (!args.includes(seqOne)) throw new Error(`unexpected Sidequest args ${args}`);
  await pool.query(
    `INSERT INTO ${SIDEQUEST_TABLE} (${names}, args)
     SELECT ${names}, REPLACE(?, ?, CONCAT('{"seq":', n.n, '}'))
     FROM ${SIDEQUEST_TABLE} j,
          (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 100000 * g.d AS n
           FROM bench_digits a, bench_digits b, bench_digits c, bench_digits e, bench_digits f, bench_digits g) n
     WHERE j.id = ? AND n.n BETWEEN 2 AND ?
     ORDER BY n.n`,
    [args, seqOne, template['id'], count],
  );
}

/** (seq, status) per Sidequest job, its states mapped onto the exactly-once check's. */
export const SIDEQUEST_COMMANDS = `SELECT CAST(JSON_VALUE(args, '$[0].seq') AS SIGNED) AS seq,
    CASE state WHEN 'completed' THEN 'SUCCESS'
      -- a claimed job that never ran is handed back by Sidequest's stale-claim release: still pending
      WHEN 'waiting' THEN 'PENDING' WHEN 'claimed' THEN 'PENDING'
      ELSE UPPER(state) END AS status
  FROM ${SIDEQUEST_TABLE}`;

/** Starts Sidequest's engine in this process with the no-op job; `stop()` closes it. */
export async function runSidequest(
  database: string,
  concurrency: number,
  pollMs: number,
  onExecute: (payload: BenchPayload) => void,
): Promise<{ stop(): Promise<void> }> {
  onBenchJob(onExecute);
  const start = () =>
    Sidequest.start({ ...engineConfig(database, concurrency, pollMs, false), dashboard: { enabled: false } });
  try {
    await start();
  } catch (e) {
    // Processes starting at once race to create the queue's row (look up, then insert): the
    // loser's insert meets the winner's row. Starting again finds it, as a restarted instance would.
    if (!/Duplicate entry/.test(String(e))) throw e;
    await Sidequest.stop();
    await start();
  }
  return { stop: () => Sidequest.stop() };
}

/** A submitter: Sidequest configured (no workers) in this process, one `enqueue` per submit. */
export async function sidequestSubmitter(
  database: string,
): Promise<{ submit(payload: BenchPayload): Promise<void>; close(): Promise<void> }> {
  await Sidequest.configure(engineConfig(database, 1, 50, false));
  return {
    submit: async (payload) => {
      // InnoDB may pick the enqueue's INSERT as a deadlock victim against the dispatcher's claim;
      // the INSERT was rolled back, so an application retries it, as here.
      for (;;) {
        try {
          await Sidequest.build(BenchNoopJob).queue(SIDEQUEST_QUEUE).enqueue(payload);
          return;
        } catch (err) {
          if (!isDeadlock(err)) throw err;
        }
      }
    },
    close: () => Sidequest.stop(),
  };
}

function isDeadlock(err: unknown): boolean {
  const errno = (err as { errno?: unknown } | null)?.errno;
  return errno === 1213 || (err instanceof Error && err.message.includes('Deadlock found'));
}
