import type { Pool, PoolConnection } from 'mysql2/promise';
import type { ClaimedCommand } from '@asynccmd/core';
import {
  asKeyRateCandidates,
  claimWithinKeyRate,
  inTurns,
  keyedCandidates,
  keyRateTake,
  keyWeightsJson,
  type KeyLimitStatements,
  type KeyWeightsCache,
  type KeyRateLimitStatements,
} from '@asynccmd/core/store-kit';
import { inTransaction, select, write } from './connection.js';
import { declareKeyed, mysqlKeyedReader, type FlowKeySql } from './flow-keys.js';
import { fromUtcText, toRecord, toUtcText, type CommandRow } from './rows.js';
import type { MysqlSql } from './sql.js';
import { CLAIM } from './sql.js';
import { LIMITS } from '@asynccmd/core';

/** Migration 14: one row per key-limited type; the type compares as the command table's does. */
export function keyLimitsDdl(t: string, collation: string): string {
  return `CREATE TABLE IF NOT EXISTS \`${t}_key_limits\` (
         type        VARCHAR(128) NOT NULL,
         key_field   VARCHAR(64)  NOT NULL,
         max_running INT          NOT NULL,
         -- Bumped by every keyed claim: its lock is a write, as a type limit's (type-limits.ts).
         claims      BIGINT       NOT NULL DEFAULT 0,
         PRIMARY KEY (type)
       ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ${collation}`;
}

/** The statements of the key limits (migration 14). */
export function keyLimitSql(t: string) {
  const limits = `\`${t}_key_limits\``;
  const table = `\`${t}\``;
  return {
    /** The lock: a write, so on Galera two nodes' keyed claims of the type conflict at certification. */
    lock: `UPDATE ${limits} SET claims = claims + 1 WHERE type = ?`,
    limit: `SELECT key_field, max_running, key_weights FROM ${limits} WHERE type = ?`,
    /** Marks the picks (ids bound as a list); one another claimer took meanwhile is left alone. */
    mark: `UPDATE ${table} FORCE INDEX (PRIMARY) SET ${CLAIM} WHERE id IN (?) AND status = 'PENDING'`,
    declare: (n: number) => `INSERT INTO ${limits} (type, key_field, max_running, key_weights)
      VALUES ${Array.from({ length: n }, () => '(?, ?, ?, ?)').join(', ')}
      ON DUPLICATE KEY UPDATE key_field = VALUES(key_field), max_running = VALUES(max_running),
        key_weights = VALUES(key_weights)`,
    list: `SELECT type, key_field AS keyField, max_running AS maxRunning, key_weights AS weightsJson
      FROM ${limits} ORDER BY type`,
  };
}

export type KeyLimitSql = ReturnType<typeof keyLimitSql>;

/**
 * The keyed claim of up to `max` commands of `type` in a READ COMMITTED transaction that holds its
 * key-limit row, read back by the round's token; nothing without a stored key limit.
 */
export function claimKeyedDue(
  pool: Pool,
  sql: KeyLimitSql,
  flow: FlowKeySql,
  commands: MysqlSql,
  r: {
    token: string;
    instance: string | null;
    leaseMicros: number;
    now: string;
    type: string;
    max: number;
    /** Parses the type's stored weights (a weighted fair share). */
    weights: KeyWeightsCache;
  },
): Promise<ClaimedCommand[]> {
  return inTransaction(pool, true, async (conn: PoolConnection) => {
    if ((await write(conn, sql.lock, [r.type])).affectedRows === 0) return [];
    const [limit] = await select<{
      key_field: string;
      max_running: number | string;
      key_weights: string | null;
    }>(conn, sql.limit, [r.type]);
    if (limit === undefined) return [];
    const weights = r.weights.of(limit.key_weights);
    const picked = await keyedCandidates(mysqlKeyedReader(conn, flow, r.type, r.now), {
      cap: Number(limit.max_running),
      limit: r.max,
      nowMs: fromUtcText(r.now).getTime(),
      countRunning: true,
      ...(weights === undefined ? {} : { weights }),
    });
    const ids = picked.map((c) => c.id);
    if (ids.length === 0) return [];
    await write(conn, sql.mark, [r.token, r.instance, r.leaseMicros, ids]);
    // The round's token also marks what it claims of other types: only this type's rows.
    const rows = (await select<CommandRow>(conn, commands.claimedBy, [r.token])).filter(
      (row) => row.type === r.type,
    );
    return inTurns(rows.map(toRecord) as ClaimedCommand[], limit.key_field, weights);
  });
}

/** The `<table>_key_limits` statements on the store's pool. */
export function mysqlKeyLimitStatements(pool: Pool, sql: KeyLimitSql, flow: FlowKeySql): KeyLimitStatements {
  return {
    reader: (type, now) => mysqlKeyedReader(pool, flow, type, toUtcText(now)),
    write: (limits) =>
      declareKeyed(pool, flow, limits, (conn) =>
        write(
          conn,
          sql.declare(limits.length),
          limits.flatMap((l) => [l.type, l.keyField, l.maxRunning, keyWeightsJson(l)]),
        ),
      ),
    read: () =>
      select<{ type: string; keyField: string; maxRunning: number | string; weightsJson: string | null }>(
        pool,
        sql.list,
      ),
  };
}

/** Migration 15: one row per type with a rate limit per key, and one token bucket per key in use. */
export function keyRateLimitsDdl(t: string, collation: string): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS \`${t}_key_rate_limits\` (
         type       VARCHAR(128) NOT NULL,
         key_field  VARCHAR(64)  NOT NULL,
         max_starts INT          NOT NULL,
         period_ms  INT          NOT NULL,
         burst      INT          NOT NULL,
         -- Bumped by every keyed-rate claim: its lock is a write, as a type limit's.
         claims     BIGINT       NOT NULL DEFAULT 0,
         PRIMARY KEY (type)
       ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ${collation}`,
    // A key compares byte for byte, as the JSON text it comes from; refilled_at_ms is epoch ms (UTC).
    `CREATE TABLE IF NOT EXISTS \`${t}_key_rate_buckets\` (
         type           VARCHAR(128) NOT NULL,
         bucket_key     VARCHAR(${LIMITS.rateKeyChars}) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
         tokens         DOUBLE       NOT NULL,
         refilled_at_ms DOUBLE       NOT NULL,
         PRIMARY KEY (type, bucket_key)
       ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ${collation}`,
  ];
}

/** The statements of the per-key rate limits (migration 15). */
export function keyRateLimitSql(t: string) {
  const limits = `\`${t}_key_rate_limits\``;
  const buckets = `\`${t}_key_rate_buckets\``;
  const table = `\`${t}\``;
  return {
    lock: `UPDATE ${limits} SET claims = claims + 1 WHERE type = ?`,
    limit: `SELECT key_field AS keyField, max_starts AS maxStarts, period_ms AS periodMs, burst,
        TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000 AS nowMs
      FROM ${limits} WHERE type = ?`,
    buckets: `SELECT bucket_key AS \`key\`, tokens, refilled_at_ms AS refilledAtMs
      FROM ${buckets} WHERE type = ? AND bucket_key IN (?)`,
    mark: `UPDATE ${table} FORCE INDEX (PRIMARY) SET ${CLAIM} WHERE id IN (?) AND status = 'PENDING'`,
    save: (n: number) => `INSERT INTO ${buckets} (type, bucket_key, tokens, refilled_at_ms)
      VALUES ${Array.from({ length: n }, () => '(?, ?, ?, ?)').join(', ')}
      ON DUPLICATE KEY UPDATE tokens = VALUES(tokens), refilled_at_ms = VALUES(refilled_at_ms)`,
    /** Bound: type, now ms, max starts, burst, period ms, burst: the buckets full again. */
    prune: `DELETE FROM ${buckets} WHERE type = ?
      AND tokens + (? - refilled_at_ms) * (? - ?) / ? >= ?`,
    declare: (n: number) => `INSERT INTO ${limits} (type, key_field, max_starts, period_ms, burst)
      VALUES ${Array.from({ length: n }, () => '(?, ?, ?, ?, ?)').join(', ')}
      ON DUPLICATE KEY UPDATE key_field = VALUES(key_field), max_starts = VALUES(max_starts),
        period_ms = VALUES(period_ms), burst = VALUES(burst)`,
    list: `SELECT type, key_field AS keyField, max_starts AS maxStarts, period_ms AS periodMs, burst
      FROM ${limits} ORDER BY type`,
  };
}

export type KeyRateLimitSql = ReturnType<typeof keyRateLimitSql>;

/** The keyed-rate claim of up to `max` commands of `type` in a READ COMMITTED transaction. */
export function claimKeyRatedDue(
  pool: Pool,
  sql: KeyRateLimitSql,
  flow: FlowKeySql,
  commands: MysqlSql,
  r: { token: string; instance: string | null; leaseMicros: number; now: string; type: string; max: number },
): Promise<ClaimedCommand[]> {
  return inTransaction(pool, true, (conn: PoolConnection) =>
    claimWithinKeyRate<ClaimedCommand>(
      r.max,
      (row) => row.id,
      {
        lock: async () => {
          if ((await write(conn, sql.lock, [r.type])).affectedRows === 0) return null;
          const [limit] = await select<Record<string, string | number>>(conn, sql.limit, [r.type]);
          if (limit === undefined) return null;
          return {
            type: r.type,
            keyField: String(limit['keyField']),
            maxStarts: Number(limit['maxStarts']),
            periodMs: Number(limit['periodMs']),
            burst: Number(limit['burst']),
            nowMs: Number(limit['nowMs']),
          };
        },
        candidates: async (_keyField, perKey) =>
          asKeyRateCandidates(
            await keyedCandidates(
              mysqlKeyedReader(conn, flow, r.type, r.now),
              keyRateTake(perKey, fromUtcText(r.now).getTime()),
            ),
          ),
        buckets: async (keys) =>
          (
            await select<{ key: string; tokens: number | string; refilledAtMs: number | string }>(
              conn,
              sql.buckets,
              [r.type, keys],
            )
          ).map((b) => ({ key: b.key, tokens: Number(b.tokens), refilledAtMs: Number(b.refilledAtMs) })),
        claim: async (ids) => {
          await write(conn, sql.mark, [r.token, r.instance, r.leaseMicros, ids]);
          const picked = new Set(ids);
          const rows = await select<CommandRow>(conn, commands.claimedBy, [r.token]);
          return rows.filter((row) => picked.has(String(row.id))).map(toRecord) as ClaimedCommand[];
        },
        save: async (spent, limit) => {
          await write(
            conn,
            sql.save(spent.length),
            spent.flatMap((b) => [r.type, b.key, b.tokens, b.refilledAtMs]),
          );
          await write(conn, sql.prune, [
            r.type,
            limit.nowMs,
            limit.maxStarts,
            limit.burst,
            limit.periodMs,
            limit.burst,
          ]);
        },
      },
      inTurns,
    ),
  );
}

/** The `<table>_key_rate_limits` statements on the store's pool. */
export function mysqlKeyRateLimitStatements(
  pool: Pool,
  sql: KeyRateLimitSql,
  flow: FlowKeySql,
): KeyRateLimitStatements {
  return {
    write: (limits) =>
      declareKeyed(pool, flow, limits, (conn) =>
        write(
          conn,
          sql.declare(limits.length),
          limits.flatMap((l) => [l.type, l.keyField, l.maxStarts, l.periodMs, l.burst]),
        ),
      ),
    read: () =>
      select<Record<'type' | 'keyField' | 'maxStarts' | 'periodMs' | 'burst', string | number>>(
        pool,
        sql.list,
      ),
  };
}
