import type { SqliteDatabase } from '@asynccmd/adapter-sqlite';
import { defineExecutor, defineTransactionalExecutor, type AnyExecutor } from '@asynccmd/runtime';
import type { Connection } from 'mysql2/promise';
import type { PoolClient } from 'pg';
import { mysqlPool } from '../mysql.js';
import { pgPool } from '../pg.js';
import {
  BENCH_TYPE,
  EFFECT_TABLE,
  type BenchPayload,
  type EffectMode,
  type SystemSpec,
} from '../protocol.js';
import type { OnExecute } from './consumers.js';

/**
 * asynccmd's executor for the effect drains: one row into the application's EFFECT_TABLE per
 * command, through the attempt's transaction (`transactional: true`, `ctx.tx`: the row and the
 * SUCCESS commit together) or, for reference, in a transaction of its own on a pool of its own (the
 * runtime writes the SUCCESS afterwards, batched as for any executor).
 */

type AsynccmdSpec = Extract<SystemSpec, { kind: 'asynccmd-pg' | 'asynccmd-mysql' | 'asynccmd-sqlite' }>;

export interface EffectExecutor {
  readonly executor: AnyExecutor;
  /** Closes the executor's own connections (none for a transactional one). */
  close(): Promise<void>;
}

/**
 * Connections of the store's pool beside concurrency C: a transactional attempt holds one for its
 * whole run, so the pool is sized above C (docs/runtime.md), leaving room for claims and heartbeats.
 */
export const TRANSACTIONAL_SPARE_CONNECTIONS = 2;

/** The store's pool size for a consumer of `spec` at `concurrency` (the no-op drains use 4). */
export function storeConnections(spec: AsynccmdSpec, concurrency: number): number {
  return spec.effect === 'transactional' ? concurrency + TRANSACTIONAL_SPARE_CONNECTIONS : 4;
}

/** The effect table's INSERT of one run, in the dialect's placeholders. */
function insertSql(spec: AsynccmdSpec): string {
  return spec.kind === 'asynccmd-pg'
    ? `INSERT INTO ${spec.schema}.${EFFECT_TABLE} (seq) VALUES ($1)`
    : `INSERT INTO ${EFFECT_TABLE} (seq) VALUES (?)`;
}

export async function effectExecutor(
  spec: AsynccmdSpec & { readonly effect: EffectMode },
  concurrency: number,
  onExecute: OnExecute,
): Promise<EffectExecutor> {
  const sql = insertSql(spec);
  const nothingToClose = async (): Promise<void> => undefined;
  if (spec.effect === 'transactional') {
    // The run is recorded once the row is written, before the runtime's SUCCESS and COMMIT.
    const executor: AnyExecutor =
      spec.kind === 'asynccmd-pg'
        ? defineTransactionalExecutor<PoolClient>()<typeof BENCH_TYPE, BenchPayload>({
            type: BENCH_TYPE,
            mode: 'ASYNC_POOL',
            transactional: true,
            execute: async (payload, ctx) => {
              await ctx.tx.query(sql, [payload.seq]);
              onExecute(payload);
            },
          })
        : spec.kind === 'asynccmd-mysql'
          ? defineTransactionalExecutor<Connection>()<typeof BENCH_TYPE, BenchPayload>({
              type: BENCH_TYPE,
              mode: 'ASYNC_POOL',
              transactional: true,
              execute: async (payload, ctx) => {
                await ctx.tx.query(sql, [payload.seq]);
                onExecute(payload);
              },
            })
          : defineTransactionalExecutor<SqliteDatabase>()<typeof BENCH_TYPE, BenchPayload>({
              type: BENCH_TYPE,
              mode: 'ASYNC_POOL',
              transactional: true,
              execute: (payload, ctx) => {
                ctx.tx.prepare(sql).run(payload.seq);
                onExecute(payload);
              },
            });
    return { executor, close: nothingToClose };
  }
  const own = await ownConnection(spec, concurrency, sql);
  return {
    executor: defineExecutor<typeof BENCH_TYPE, BenchPayload>({
      type: BENCH_TYPE,
      mode: 'ASYNC_POOL',
      execute: async (payload) => {
        await own.insert(payload.seq);
        onExecute(payload);
      },
    }),
    close: own.close,
  };
}

/** The application's own connections for the non-transactional executor: one INSERT, autocommitted. */
async function ownConnection(
  spec: AsynccmdSpec,
  concurrency: number,
  sql: string,
): Promise<{ insert(seq: number): Promise<void>; close(): Promise<void> }> {
  if (spec.kind === 'asynccmd-pg') {
    const pool = pgPool(concurrency);
    return {
      insert: async (seq) => {
        await pool.query(sql, [seq]);
      },
      close: () => pool.end(),
    };
  }
  if (spec.kind === 'asynccmd-mysql') {
    const pool = mysqlPool(concurrency, spec.database);
    return {
      insert: async (seq) => {
        await pool.query(sql, [seq]);
      },
      close: () => pool.end(),
    };
  }
  return sqliteConnection(spec.filename, sql);
}

async function sqliteConnection(
  filename: string,
  sql: string,
): Promise<{ insert(seq: number): Promise<void>; close(): Promise<void> }> {
  // Loaded here only: a PostgreSQL or MySQL consumer never loads better-sqlite3.
  const { openSqlite } = await import('../baselines/raw-sql-sqlite.js');
  const db = openSqlite(filename);
  const statement = db.prepare<[number]>(sql);
  return {
    insert: async (seq) => {
      statement.run(seq);
    },
    close: async () => {
      db.close();
    },
  };
}
