import type { TypeLimitStatements } from '@asynccmd/core/store-kit';
import { preparedRows, type PostgresConnection, type PostgresStatements } from './connection.js';
import type { TableNames } from './names.js';

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
export function withinTypeLimit<Tx, Row>(
  connection: PostgresConnection<Tx>,
  sql: TypeLimitSql,
  type: string,
  max: number,
  claim: (tx: Tx, free: number) => Promise<Row[]>,
): Promise<Row[]> {
  return connection.claimTransaction(async (tx) => {
    const locked = await preparedRows<Tx, { max_running: string }>(connection, tx, sql.lock, [type]);
    const limit = locked.rows[0]?.max_running;
    if (limit === undefined) return [];
    const counted = await preparedRows<Tx, { running: string }>(connection, tx, sql.running, [type]);
    const free = Math.min(max, Number(limit) - Number(counted.rows[0]?.running ?? 0));
    return free > 0 ? claim(tx, free) : [];
  });
}

/** The `<table>_type_limits` rows on the store's connection. */
export function postgresTypeLimitStatements(on: PostgresStatements, sql: TypeLimitSql): TypeLimitStatements {
  return {
    write: (limits) => on.query(sql.declare, [limits.map((l) => l.type), limits.map((l) => l.maxRunning)]),
    read: async () =>
      (await on.query<{ type: string; maxRunning: string }>(sql.list)).rows.map((r) => ({
        type: r.type,
        maxRunning: Number(r.maxRunning),
      })),
  };
}
