import type { Pool, PoolConnection } from 'mysql2/promise';
import type { TypeLimitStatements } from '@asynccmd/core/store-kit';
import type { ClaimStrategy } from './claim-strategies.js';
import { inTransaction, select, write } from './connection.js';
import type { CommandRow } from './rows.js';
import type { MysqlSql } from './sql.js';

/** The statements of the type limits (migration 10). */
export function typeLimitSql(t: string) {
  const limits = `\`${t}_type_limits\``;
  return {
    /**
     * A type's limit row, locked to the end of the claim's transaction by a write (none without a
     * limit): on Galera, where a row lock binds one node only, two nodes' claims of the type then
     * conflict at certification and one is rolled back (a deadlock error, retried), instead of
     * both counting the same RUNNING commands.
     */
    lock: `UPDATE ${limits} SET claims = claims + 1 WHERE type = ?`,
    limit: `SELECT max_running FROM ${limits} WHERE type = ?`,
    /**
     * A type's RUNNING commands. A statement of its own after the lock: in READ COMMITTED its
     * snapshot is taken then, so it sees every claim committed before the lock was granted.
     */
    running: `SELECT COUNT(*) AS running FROM \`${t}\` FORCE INDEX (idx_due) WHERE status = 'RUNNING' AND type = ?`,
    typeOf: `SELECT type FROM \`${t}\` WHERE id = ?`,
    declare: (n: number) => `INSERT INTO ${limits} (type, max_running)
      VALUES ${Array.from({ length: n }, () => '(?, ?)').join(', ')}
      ON DUPLICATE KEY UPDATE max_running = VALUES(max_running)`,
    list: `SELECT type, max_running AS maxRunning FROM ${limits} ORDER BY type`,
  };
}

export type TypeLimitSql = ReturnType<typeof typeLimitSql>;

/**
 * Runs `claim(conn, free)` in a READ COMMITTED transaction that holds `type`'s limit row, with
 * `free` the places its limit leaves (at most `max`); nothing runs without a stored limit or a
 * free place.
 */
export function withinTypeLimit<Row>(
  pool: Pool,
  sql: TypeLimitSql,
  type: string,
  max: number,
  claim: (conn: PoolConnection, free: number) => Promise<Row[]>,
): Promise<Row[]> {
  return inTransaction(pool, true, async (conn) => {
    if ((await write(conn, sql.lock, [type])).affectedRows === 0) return [];
    const [locked] = await select<{ max_running: number }>(conn, sql.limit, [type]);
    if (locked === undefined) return [];
    const [counted] = await select<{ running: number | string }>(conn, sql.running, [type]);
    const free = Math.min(max, Number(locked.max_running) - Number(counted?.running ?? 0));
    return free > 0 ? claim(conn, free) : [];
  });
}

/** The claim of `free` due commands of `type` inside withinTypeLimit's transaction, read back by token. */
export async function claimLimitedDue(
  conn: PoolConnection,
  sql: MysqlSql,
  strategy: ClaimStrategy,
  r: { token: string; instance: string | null; leaseMicros: number; now: string; type: string; free: number },
): Promise<CommandRow[]> {
  if (strategy.skipLocked) {
    const ids = (await select<{ id: string }>(conn, sql.lockDue, [r.now, [r.type], r.free])).map((c) => c.id);
    if (ids.length === 0) return [];
    await write(conn, sql.markClaimed, [r.token, r.instance, r.leaseMicros, ids]);
  } else {
    const marked = await write(conn, sql.markDueLegacy, [
      r.now,
      [r.type],
      r.free,
      r.token,
      r.instance,
      r.leaseMicros,
      r.now,
      [r.type],
    ]);
    if (marked.affectedRows === 0) return [];
  }
  // The round's token also marks what it claimed of other types: only this type's rows.
  return (await select<CommandRow>(conn, sql.claimedBy, [r.token])).filter((row) => row.type === r.type);
}

/** The `<table>_type_limits` rows on the store's pool. */
export function mysqlTypeLimitStatements(pool: Pool, sql: TypeLimitSql): TypeLimitStatements {
  return {
    write: (limits) =>
      write(
        pool,
        sql.declare(limits.length),
        limits.flatMap((l) => [l.type, l.maxRunning]),
      ),
    read: () => select<{ type: string; maxRunning: number | string }>(pool, sql.list),
  };
}
