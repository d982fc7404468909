import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { ClaimedBatch } from './claim-loop.js';
import { BENCH_TYPE, type BenchPayload } from '../protocol.js';
import { succeededValues } from './moved-row.js';

/**
 * The PostgreSQL raw-SQL baseline: the claim and complete statements asynccmd's adapter issues,
 * run from a bare loop with no runtime around them — the ceiling asynccmd is measured against.
 */

/** The adapter's database clock: now() at millisecond precision, as its TIMESTAMPTZ(3) columns keep. */
const NOW = `date_trunc('milliseconds', now())`;

export function rawTable(schema: string): string {
  return `${schema}.async_command`;
}

/** The table asynccmd's completions move finished commands to (the adapter's migration 21). */
export function historyTable(schema: string): string {
  return `${schema}.async_command_history`;
}

/** Pre-inserts `count` PENDING commands, due a second ago, with payload {seq} for seq = 1..count. */
export async function seedPending(pool: pg.Pool, table: string, type: string, count: number): Promise<void> {
  await pool.query(
    `INSERT INTO ${table} (type, payload, max_retry, next_run_at, created_at, updated_at)
     SELECT $1, json_build_object('seq', s), 5, now() - interval '1 second', now(), now()
     FROM generate_series(1, $2::int) s`,
    [type, count],
  );
}

/**
 * Bulk-inserts finished (SUCCESS) rows of another type where finished commands live, the history
 * table, their ids from the command table's sequence: history the claim must not wade through.
 */
export async function seedFinished(pool: pg.Pool, schema: string, count: number): Promise<void> {
  if (count <= 0) return;
  await pool.query(
    `INSERT INTO ${historyTable(schema)} (id, type, payload, status, max_retry, next_run_at, created_at, updated_at,
                                          started_at, finished_at)
     SELECT nextval(pg_get_serial_sequence($2, 'id')), 'bench.finished', json_build_object('seq', -s), 'SUCCESS', 5,
            now() - interval '1 hour', now() - interval '1 hour', now(), now(), now()
     FROM generate_series(1, $1::int) s`,
    [count, rawTable(schema)],
  );
}

/** One row exactly as a submit writes it, inside the caller's transaction. */
export async function insertOne(client: pg.PoolClient, schema: string, payload: BenchPayload): Promise<void> {
  await client.query(
    `INSERT INTO ${rawTable(schema)} (type, biz_key, payload, max_retry, next_run_at, owner, headers, created_at, updated_at)
     VALUES ($1, NULL, $2, 5, ${NOW}, NULL, '{}', ${NOW}, ${NOW})`,
    [BENCH_TYPE, JSON.stringify(payload)],
  );
}

/**
 * The same row in a transaction of its own sent as one simple query (BEGIN; INSERT; COMMIT), the
 * payload inlined as a literal: one round trip, no statement of the client's own around it. What a
 * client that adds nothing to the database's own work would reach.
 */
export async function insertOneRoundTrip(
  pool: pg.Pool,
  schema: string,
  payload: BenchPayload,
): Promise<void> {
  const client = await pool.connect();
  try {
    const json = client.escapeLiteral(JSON.stringify(payload));
    await client.query(
      `BEGIN; INSERT INTO ${rawTable(schema)} (type, biz_key, payload, max_retry, next_run_at, owner, headers, created_at, updated_at)
       VALUES ('${BENCH_TYPE}', NULL, ${json}, 5, ${NOW}, NULL, '{}', ${NOW}, ${NOW}); COMMIT`,
    );
  } finally {
    client.release();
  }
}

export interface ClaimedRow {
  readonly id: string;
  readonly payload: BenchPayload;
}

/** The adapter's claim: due ids locked with SKIP LOCKED in a CTE, updated with RETURNING. */
export async function claim(
  pool: pg.Pool,
  schema: string,
  limit: number,
  token: string,
): Promise<ClaimedRow[]> {
  const t = rawTable(schema);
  const { rows } = await pool.query<ClaimedRow>(
    `WITH due AS (
       SELECT id FROM ${t}
       WHERE status = 'PENDING' AND next_run_at <= $1::timestamptz AND type = ANY($2::text[])
       ORDER BY next_run_at, id
       LIMIT $3
       FOR UPDATE SKIP LOCKED
     )
     UPDATE ${t} c
     SET status = 'RUNNING', claim_token = $4, started_at = ${NOW}, updated_at = ${NOW},
         lease_until = ${NOW} + $5::float8 * interval '1 millisecond'
     FROM due WHERE c.id = due.id
     RETURNING c.*`,
    [new Date(), [BENCH_TYPE], limit, token, 60_000],
  );
  return rows;
}

/** The columns of the command table, as the history copies them, per schema (read once). */
const columnsOf = new Map<string, Promise<string[]>>();

export function commandColumns(pool: pg.Pool, schema: string): Promise<string[]> {
  let columns = columnsOf.get(schema);
  if (columns === undefined) {
    columns = pool
      .query<{ name: string }>(
        `SELECT attname AS name FROM pg_attribute
         WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
        [historyTable(schema)],
      )
      .then((r) => r.rows.map((c) => c.name));
    columnsOf.set(schema, columns);
  }
  return columns;
}

const SUCCEEDED = succeededValues(NOW);

/**
 * The adapter's batched complete as text: each succeeded row, fenced by its claim token, leaves the
 * command table for the history in the same statement. `ids` and `tokens`: SQL expressions of a
 * bigint[] and a text[] (placeholders, or literals where the statement goes out as a simple query).
 */
export function completeSql(schema: string, columns: readonly string[], ids: string, tokens: string): string {
  return `WITH done AS (
       DELETE FROM ${rawTable(schema)} AS c USING unnest(${ids}, ${tokens}) AS r(id, token)
       WHERE c.id = r.id AND c.status = 'RUNNING' AND c.claim_token = r.token
         AND NOT c.has_dependants AND c.schedule_name IS NULL
       RETURNING c.*)
     INSERT INTO ${historyTable(schema)} (${columns.join(', ')})
     SELECT ${columns.map((c) => SUCCEEDED[c] ?? `done.${c}`).join(', ')} FROM done
     RETURNING id`;
}

/** The adapter's batched complete, fenced by each row's claim token (completeSql). */
export async function complete(
  pool: pg.Pool,
  schema: string,
  ids: readonly string[],
  token: string,
): Promise<number> {
  const columns = await commandColumns(pool, schema);
  const result = await pool.query(completeSql(schema, columns, '$1::bigint[]', '$2::text[]'), [
    ids,
    ids.map(() => token),
  ]);
  return result.rowCount ?? 0;
}

/** The next batch of up to `limit` commands under a fresh token, or null when none is due. */
export async function claimPgBatch(
  pool: pg.Pool,
  schema: string,
  limit: number,
): Promise<ClaimedBatch | null> {
  const token = randomUUID();
  const rows = await claim(pool, schema, limit, token);
  if (rows.length === 0) return null;
  return {
    payloads: rows.map((r) => r.payload),
    complete: async () => {
      await complete(
        pool,
        schema,
        rows.map((r) => r.id),
        token,
      );
    },
  };
}
