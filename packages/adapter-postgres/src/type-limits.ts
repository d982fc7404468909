import type { Pool, PoolClient } from 'pg';
import type { TypeLimitStore } from '@asynccmd/core';
import { typeLimitStore } from '@asynccmd/core/store-kit';
import type { TableNames } from './names.js';
import { runInTransaction } from './pipeline/transaction.js';

/** The statements of the type limits (migration 10). */
export function typeLimitSql(n: TableNames, t: string) {
  return {
    /** $1 type: its limit row, locked to the end of the claim's transaction; none without a limit. */
    lock: `SELECT max_running FROM ${n.typeLimits} WHERE type = $1 FOR UPDATE`,
    /**
     * $1 type: its RUNNING commands. A statement of its own after the lock: in READ COMMITTED it
     * sees every claim committed before the lock was granted. The RUNNING rows come from the
     * partial lease index and the type is matched after (OFFSET 0 keeps it out of the scan): left
     * to itself, a planner without statistics ANDs in the (type, biz_key) index, which holds the
     * type's whole history.
     */
    running: `SELECT count(*)::integer AS running
      FROM (SELECT type FROM ${t} WHERE status = 'RUNNING' OFFSET 0) AS r WHERE type = $1`,
    typeOf: `SELECT type FROM ${t} WHERE id = $1::bigint`,
    declare: `INSERT INTO ${n.typeLimits} (type, max_running)
      SELECT * FROM unnest($1::text[], $2::integer[])
      ON CONFLICT (type) DO UPDATE SET max_running = EXCLUDED.max_running`,
    list: `SELECT type, max_running AS "maxRunning" FROM ${n.typeLimits} ORDER BY type`,
  };
}

type TypeLimitSql = ReturnType<typeof typeLimitSql>;

/**
 * Runs `claim(client, free)` in a transaction that holds `type`'s limit row, with `free` the places
 * its limit leaves (at most `max`); nothing runs without a stored limit or a free place.
 */
export function withinTypeLimit<Row>(
  pool: Pool,
  sql: TypeLimitSql,
  type: string,
  max: number,
  claim: (client: PoolClient, free: number) => Promise<Row[]>,
): Promise<Row[]> {
  return runInTransaction(pool, async (client) => {
    const locked = await client.query<{ max_running: number }>(sql.lock, [type]);
    const limit = locked.rows[0]?.max_running;
    if (limit === undefined) return [];
    const counted = await client.query<{ running: number }>(sql.running, [type]);
    const free = Math.min(max, limit - (counted.rows[0]?.running ?? 0));
    return free > 0 ? claim(client, free) : [];
  });
}

/** The `<table>_type_limits` rows on the store's pool. */
export function postgresTypeLimitStore(pool: Pool, sql: TypeLimitSql): TypeLimitStore {
  return typeLimitStore(
    (limits) => pool.query(sql.declare, [limits.map((l) => l.type), limits.map((l) => l.maxRunning)]),
    async () => (await pool.query<{ type: string; maxRunning: number }>(sql.list)).rows,
  );
}
