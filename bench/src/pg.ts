import pg from 'pg';

export let PG_URL = process.env['BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * Points this process, and every child it starts from now on, at another server (the soak's own);
 * returns the URL used before.
 */
export function usePgUrl(url: string): string {
  const before = PG_URL;
  PG_URL = url;
  process.env['BENCH_PG_URL'] = url;
  return before;
}

/**
 * `fastCommit` sessions commit with synchronous_commit off, as the adapter's own hot-path pool
 * does for claims and outcomes (durableClaims: false), and plan with sorts, bitmap and sequential
 * scans off, as the adapter's claim function does: so the raw loop reads the due index in order on
 * a table never analyzed, and is measured like for like. `plannedAsClaims` alone: those planner
 * settings with the server's synchronous_commit (a raw loop's durable transactions).
 */
export function pgPool(max: number, fastCommit = false, plannedAsClaims = fastCommit): pg.Pool {
  const options = [
    ...(fastCommit ? ['-c synchronous_commit=off'] : []),
    ...(plannedAsClaims ? ['-c enable_sort=off -c enable_bitmapscan=off -c enable_seqscan=off'] : []),
  ].join(' ');
  const pool = new pg.Pool({ connectionString: PG_URL, max, ...(options === '' ? {} : { options }) });
  // An idle client losing its server must not crash a bench process; the next query reports it.
  pool.on('error', () => undefined);
  return pool;
}

/** Drops a schema and everything in it, then creates it empty. */
export async function recreateSchema(pool: pg.Pool, schema: string): Promise<void> {
  await dropSchema(pool, schema);
  await pool.query(`CREATE SCHEMA ${schema}`);
}

export async function dropSchema(pool: pg.Pool, schema: string): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
}

export async function pgVersion(pool: pg.Pool): Promise<string> {
  const { rows } = await pool.query<{ v: string }>('SELECT version() AS v');
  return (rows[0]?.v ?? '').split(' on ')[0] ?? '';
}

/** Runs `fn` inside BEGIN … COMMIT on one pooled client (ROLLBACK on error). */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
