import { createPostgresStore } from '@asynccmd/adapter-postgres';
import type { CommandStore, ExecutionMode } from '@asynccmd/core';
import {
  AsyncCommands,
  defineExecutor,
  type AnyExecutor,
  type AsyncCommandsOptions,
  type PoolOptions,
  type RetentionOptions,
} from '@asynccmd/runtime';
import { PG_URL } from '../pg.js';
import { BENCH_TYPE, type BenchPayload, type FlowUsage, type SystemSpec } from '../protocol.js';
import { KEY_MAX_RUNNING, RATE_LIMIT } from '../scenarios/usage.js';
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

/** The no-op executor in a mode, or an executor of the bench type defined elsewhere (effects.ts). */
export type BenchExecutor = { readonly mode: ExecutionMode; readonly onExecute: OnExecute } | AnyExecutor;

/**
 * A runtime running the bench type (the no-op in `mode`, or the executor given) on a shared pool of
 * `pool.concurrency`, or (executor undefined) one that only submits it; with `retention`, the
 * runtime's retention option (the soak).
 */
export function benchRuntime(
  store: CommandStore,
  pool: PoolOptions,
  executor?: BenchExecutor,
  typeLimit?: number,
  retention?: RetentionOptions,
  flow?: FlowUsage,
  tuned: Partial<AsyncCommandsOptions> = {},
): BenchRuntime {
  const executors: AnyExecutor[] =
    executor === undefined
      ? []
      : 'type' in executor
        ? [executor]
        : [
            defineExecutor<typeof BENCH_TYPE, BenchPayload>({
              type: BENCH_TYPE,
              mode: executor.mode,
              execute: (payload) => executor.onExecute(payload),
            }),
          ];
  return new AsyncCommands<BenchTypes, unknown>({
    store,
    executors,
    submitOnlyTypes: executor ? [] : [BENCH_TYPE],
    sharedPool: pool,
    ...(typeLimit === undefined ? {} : { typeLimits: { [BENCH_TYPE]: typeLimit } }),
    ...(retention === undefined ? {} : { retention }),
    ...flowOptions(flow),
    ...tuned,
  });
}

/** One command in its own transaction, through the client, the way an application submits. */
export async function submitOne(runtime: BenchRuntime, payload: BenchPayload): Promise<void> {
  await runtime.client.transaction((_tx, submit) => submit(BENCH_TYPE, payload));
}

/** The runtime options of a flow usage on the bench type (scenarios/usage.ts). */
function flowOptions(flow: FlowUsage | undefined): Partial<AsyncCommandsOptions> {
  if (flow === 'rate limit') return { rateLimits: { [BENCH_TYPE]: RATE_LIMIT } };
  if (flow === 'fair share') return { fairShare: { [BENCH_TYPE]: { key: 'tenant' } } };
  if (flow === 'key limit') {
    return { keyLimits: { [BENCH_TYPE]: { key: 'tenant', maxRunning: KEY_MAX_RUNNING } } };
  }
  return {};
}
