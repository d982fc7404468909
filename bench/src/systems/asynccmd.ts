import { createPostgresStore } from '@asynccmd/adapter-postgres';
import type { CommandStore, ExecutionMode } from '@asynccmd/core';
import { AsyncCommands, defineExecutor, type PoolOptions } from '@asynccmd/runtime';
import { PG_URL } from '../pg.js';
import { BENCH_TYPE, type BenchPayload, type SystemSpec } from '../protocol.js';
import type { OnExecute } from './consumers.js';

/** asynccmd as an application uses it: a store, the runtime with defaults, one no-op executor. */

type BenchTypes = { readonly [BENCH_TYPE]: BenchPayload };
export type BenchRuntime = AsyncCommands<BenchTypes, unknown>;

type AsynccmdSpec = Extract<SystemSpec, { kind: 'asynccmd-pg' | 'asynccmd-mysql' | 'asynccmd-sqlite' }>;

/** The store for a spec, with `connections` pooled connections, already connected. */
export async function openStore(spec: AsynccmdSpec, connections: number): Promise<CommandStore> {
  let store: CommandStore;
  if (spec.kind === 'asynccmd-pg') {
    store = createPostgresStore({
      connectionString: PG_URL,
      schema: spec.schema,
      poolConfig: { max: connections },
    });
  } else if (spec.kind === 'asynccmd-sqlite') {
    const { createSqliteStore } = await import('@asynccmd/adapter-sqlite');
    store = createSqliteStore({ filename: spec.filename });
  } else {
    const { openMysqlStore } = await import('./asynccmd-mysql.js');
    store = await openMysqlStore(spec.database, spec.claimStrategy, connections);
  }
  // Open every connection now, so connecting is not part of what is timed.
  await Promise.all(Array.from({ length: connections }, () => store.ping()));
  return store;
}

/**
 * A runtime running the bench type in `mode` on a shared pool of `pool.concurrency`, or (executor
 * undefined) one that only submits it.
 */
export function benchRuntime(
  store: CommandStore,
  pool: PoolOptions,
  executor?: { mode: ExecutionMode; onExecute: OnExecute },
  typeLimit?: number,
): BenchRuntime {
  const executors = executor
    ? [
        defineExecutor<typeof BENCH_TYPE, BenchPayload>({
          type: BENCH_TYPE,
          mode: executor.mode,
          execute: (payload) => executor.onExecute(payload),
        }),
      ]
    : [];
  return new AsyncCommands<BenchTypes, unknown>({
    store,
    executors,
    submitOnlyTypes: executor ? [] : [BENCH_TYPE],
    sharedPool: pool,
    ...(typeLimit === undefined ? {} : { typeLimits: { [BENCH_TYPE]: typeLimit } }),
  });
}

/** One command in its own transaction, through the client, the way an application submits. */
export async function submitOne(runtime: BenchRuntime, payload: BenchPayload): Promise<void> {
  await runtime.client.transaction((_tx, submit) => submit(BENCH_TYPE, payload));
}
