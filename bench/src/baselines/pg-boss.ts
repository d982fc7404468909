import { PgBoss } from 'pg-boss';
import type pg from 'pg';
import { PG_URL } from '../pg.js';
import type { BenchPayload } from '../protocol.js';

/**
 * The pg-boss baseline: its own schema and queue, jobs inserted with its `insert()`, consumed by
 * `work()` in the fastest way its documentation describes: batched fetches, LISTEN/NOTIFY wake-ups
 * (`useListenNotify` on the instance, `notify` on the queue) and burst fetching while batches come
 * back full.
 */

export const PGBOSS_QUEUE = 'bench-noop';

export function pgBossSettings(batchSize: number): string {
  return (
    `work() batchSize ${batchSize}, localConcurrency C, burstWhenBatchFull, pollingIntervalSeconds 0.5 (its minimum); ` +
    'useListenNotify on the instance, notify on the queue; max pool C + 2'
  );
}

/**
 * `maintained` (the soak): its maintenance runs as by default (`supervise`), deleting completed jobs
 * once past the queue's `deleteAfterSeconds`; otherwise none.
 */
function boss(schema: string, max: number, listen: boolean, maintained = false): PgBoss {
  const instance = new PgBoss({
    connectionString: PG_URL,
    schema,
    max,
    useListenNotify: listen,
    // The bench owns the schema's lifetime; no cron or maintenance passes during a timed run.
    schedule: false,
    supervise: maintained,
  });
  // A failing background query must surface in the run, not crash the process silently.
  instance.on('error', (err: unknown) => {
    process.emitWarning(`pg-boss: ${err instanceof Error ? err.message : String(err)}`);
  });
  return instance;
}

/** Installs pg-boss's schema afresh (the caller dropped the old one) and seeds `count` jobs seq 1..count. */
export async function preparePgBoss(schema: string, count: number): Promise<void> {
  const b = boss(schema, 2, false);
  await b.start();
  try {
    await b.createQueue(PGBOSS_QUEUE, { notify: true });
    for (let from = 1; from <= count; from += 5_000) {
      const to = Math.min(count, from + 4_999);
      const jobs = Array.from({ length: to - from + 1 }, (_, i) => ({ data: { seq: from + i } }));
      await b.insert(PGBOSS_QUEUE, jobs);
    }
  } finally {
    await b.stop({ graceful: false, close: true });
  }
}

/** Jobs of the bench queue not yet completed. */
export async function pgBossJobsLeft(pool: pg.Pool, schema: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM ${schema}.job WHERE name = $1 AND state <> 'completed'`,
    [PGBOSS_QUEUE],
  );
  return Number(rows[0]?.n ?? 0);
}

/** Runs pg-boss workers on the bench queue with a no-op handler; `stop()` shuts them down gracefully. */
export async function runPgBoss(
  schema: string,
  concurrency: number,
  batchSize: number,
  onExecute: (payload: BenchPayload) => void,
  maintained = false,
): Promise<{ stop(): Promise<void> }> {
  const b = boss(schema, concurrency + 2, true, maintained);
  await b.start();
  await b.work<BenchPayload>(
    PGBOSS_QUEUE,
    { batchSize, localConcurrency: concurrency, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 },
    async (jobs) => {
      for (const job of jobs) onExecute(job.data);
    },
  );
  return { stop: () => b.stop({ graceful: true, close: true, timeout: 30_000 }) };
}

/** Installs pg-boss's schema afresh with the bench queue deleting completed jobs after `deleteAfterSeconds` (the soak). */
export async function preparePgBossSoak(schema: string, deleteAfterSeconds: number): Promise<void> {
  const b = boss(schema, 2, false);
  await b.start();
  try {
    await b.createQueue(PGBOSS_QUEUE, { notify: true, deleteAfterSeconds });
  } finally {
    await b.stop({ graceful: false, close: true });
  }
}

/** Inserts batches of jobs into the bench queue with its `insert()` (the soak's submitter). */
export async function pgBossSubmitter(
  schema: string,
  max: number,
): Promise<{ insert(payloads: readonly BenchPayload[]): Promise<void>; stop(): Promise<void> }> {
  const b = boss(schema, max, false);
  await b.start();
  return {
    insert: async (payloads) => {
      await b.insert(
        PGBOSS_QUEUE,
        payloads.map((data) => ({ data })),
      );
    },
    stop: () => b.stop({ graceful: false, close: true }),
  };
}
