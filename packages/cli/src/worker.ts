import type { CommandStore, Logger } from '@asynccmd/core';
import {
  createAsyncCommands,
  installShutdownHandlers,
  startAdminServer,
  type AdminServer,
  type PoolOptions,
} from '@asynccmd/runtime';
import type { CommandMetrics } from '@asynccmd/runtime/metrics';
import { parseDuration } from '@asynccmd/runtime/ops';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseCount } from './arguments.js';
import { CliFailure, EXIT_FAILED, EXIT_OK, EXIT_USAGE } from './failures.js';
import { jsonLogger, LOG_LEVELS, type LogLevel } from './json-logger.js';
import { workerModuleOf, type WorkerModule } from './worker-module.js';

/** The environment variable the admin server's bearer token is read from. */
export const ADMIN_TOKEN_VARIABLE = 'ASYNCCMD_ADMIN_TOKEN';
export const DEFAULT_WORKER_SHUTDOWN_TIMEOUT_MS = 30_000;
const MAX_CONCURRENCY = 10_000;

/** `asynccmd worker` options as commander hands them over (all text). */
export interface WorkerFlags {
  readonly executors: string;
  readonly pools?: string;
  readonly concurrency?: string;
  readonly adminPort?: string;
  readonly adminHost?: string;
  readonly adminNoAuth?: boolean;
  readonly shutdownTimeout?: string;
  readonly logLevel?: string;
}

/** What the flags mean once checked: everything but the module, checked before it is loaded. */
export interface WorkerSettings {
  readonly modulePath: string;
  readonly pools: Readonly<Record<string, number>>;
  readonly concurrency: number | undefined;
  readonly admin: { readonly port: number; readonly host: string; readonly token: string | null } | null;
  readonly shutdownTimeoutMs: number;
  readonly logLevel: LogLevel;
}

export interface WorkerIo {
  /** Where the JSON log lines go (stdout). */
  readonly log: (line: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Ends the process at once (a second signal during the graceful stop). */
  readonly exit?: (code: number) => void;
}

/** Checks the flags; every problem is a usage error (exit 2) naming the flag. */
export function parseWorkerFlags(flags: WorkerFlags, env: WorkerIo['env']): WorkerSettings {
  const modulePath = resolve(flags.executors);
  if (!existsSync(modulePath)) {
    throw new CliFailure(`--executors: no file at ${JSON.stringify(flags.executors)}`, EXIT_USAGE);
  }
  const logLevel = flags.logLevel ?? 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new CliFailure(`--log-level must be one of ${LOG_LEVELS.join(', ')}`, EXIT_USAGE);
  }
  let admin: WorkerSettings['admin'] = null;
  if (flags.adminPort !== undefined) {
    const token = env[ADMIN_TOKEN_VARIABLE];
    if ((token === undefined || token === '') && flags.adminNoAuth !== true) {
      throw new CliFailure(
        `--admin-port needs a token in $${ADMIN_TOKEN_VARIABLE} (at least 16 characters), or ` +
          '--admin-no-auth to serve this machine only without one',
        EXIT_USAGE,
      );
    }
    admin = {
      port: parseCount('--admin-port', flags.adminPort, 65_535, 0),
      host: flags.adminHost ?? '127.0.0.1',
      token: flags.adminNoAuth === true ? null : (token ?? null),
    };
  } else if (flags.adminHost !== undefined || flags.adminNoAuth === true) {
    throw new CliFailure('--admin-host and --admin-no-auth go with --admin-port', EXIT_USAGE);
  }
  return {
    modulePath,
    pools: flags.pools === undefined ? {} : parsePools(flags.pools),
    concurrency:
      flags.concurrency === undefined
        ? undefined
        : parseCount('--concurrency', flags.concurrency, MAX_CONCURRENCY),
    admin,
    shutdownTimeoutMs:
      flags.shutdownTimeout === undefined
        ? DEFAULT_WORKER_SHUTDOWN_TIMEOUT_MS
        : parseDuration(flags.shutdownTimeout),
    logLevel: logLevel as LogLevel,
  };
}

/** `emails=4,reports=2`: the size of each isolated pool. */
function parsePools(text: string): Record<string, number> {
  const pools: Record<string, number> = {};
  for (const part of text.split(',')) {
    const match = /^\s*([A-Za-z0-9_.:-]{1,64})=(\d{1,5})\s*$/.exec(part);
    if (match === null) {
      throw new CliFailure(
        `--pools takes NAME=CONCURRENCY[,NAME=CONCURRENCY…], e.g. emails=4,reports=2; not ${JSON.stringify(part.slice(0, 40))}`,
        EXIT_USAGE,
      );
    }
    pools[match[1] as string] = parseCount(`--pools ${match[1]}`, match[2] as string, MAX_CONCURRENCY);
  }
  return pools;
}

/** Imports the executors module and checks its shape. */
export async function loadWorkerModule(path: string): Promise<WorkerModule> {
  let loaded: Readonly<Record<string, unknown>>;
  try {
    loaded = (await import(pathToFileURL(path).href)) as Readonly<Record<string, unknown>>;
  } catch (e) {
    // The module's own message (its first line): the module is the user's code, not a driver.
    const message = (e instanceof Error ? e.message : String(e)).split('\n')[0]?.slice(0, 300) ?? '';
    throw new CliFailure(
      `the executors module ${JSON.stringify(path)} failed to load: ${message}`,
      EXIT_FAILED,
    );
  }
  return workerModuleOf(loaded, JSON.stringify(path));
}

/** Connections a worker's store opens: one per running command at most, plus the loops'. */
export function workerPoolSize(module: WorkerModule, settings: WorkerSettings): number {
  const shared = settings.concurrency ?? module.options?.sharedPool?.concurrency ?? 8;
  const isolated = Object.values({ ...poolSizes(module), ...settings.pools }).reduce((a, b) => a + b, 0);
  return Math.min(shared + isolated + 4, 100);
}

function poolSizes(module: WorkerModule): Record<string, number> {
  return Object.fromEntries(
    Object.entries(module.options?.pools ?? {}).map(([name, pool]) => [name, pool.concurrency]),
  );
}

/**
 * Runs the module's executors (and recurring schedules) on `store` until SIGTERM or SIGINT, then
 * stops gracefully within the shutdown timeout and resolves to the exit code. The store is the
 * caller's to close.
 */
export async function runWorker(
  store: CommandStore,
  module: WorkerModule,
  settings: WorkerSettings,
  io: WorkerIo,
): Promise<number> {
  const logger = jsonLogger(io.log, settings.logLevel, { process: 'asynccmd-worker', pid: process.pid });
  // The table must be there: without it every poll would fail and only the log would say why.
  await store.list({ limit: 1 });
  const options = module.options ?? {};
  const pools: Record<string, PoolOptions> = { ...options.pools };
  for (const [name, concurrency] of Object.entries(settings.pools)) {
    pools[name] = { ...pools[name], concurrency };
  }
  const runtime = createAsyncCommands({
    ...options,
    store,
    executors: module.executors,
    recurring: module.recurring ?? [],
    logger,
    pools,
    ...(settings.concurrency !== undefined
      ? { sharedPool: { ...options.sharedPool, concurrency: settings.concurrency } }
      : {}),
  });
  let admin: AdminServer | null = null;
  if (settings.admin !== null) {
    const metrics = await loadMetrics(store, logger);
    if (metrics !== null) runtime.on(metrics.listener);
    const { port, host, token } = settings.admin;
    admin = await startAdminServer({
      store,
      port,
      host,
      logger,
      scheduleTypes: runtime.registry.types(),
      ...(metrics !== null ? { metrics } : {}),
      ...(token === null ? { auth: 'none' as const } : { token }),
    });
  }
  const stopped = new Promise<number>((done) => {
    const remove = installShutdownHandlers(runtime, {
      timeoutMs: settings.shutdownTimeoutMs,
      closeStore: false,
      logger,
      exit: (code) => {
        remove();
        // The second signal: the graceful stop is abandoned, as the operator asked.
        if (code !== EXIT_OK && io.exit !== undefined) io.exit(code);
        done(code);
      },
    });
  });
  runtime.start();
  logger.info(
    {
      types: runtime.registry.entries().map((e) => e.type),
      recurring: (module.recurring ?? []).map((s) => s.name),
      instance: runtime.instanceId,
      ...(admin !== null ? { admin: admin.url } : {}),
    },
    'asynccmd worker started',
  );
  const code = await stopped;
  await admin?.close().catch(() => undefined);
  logger.info({ code }, 'asynccmd worker stopped');
  return code === EXIT_OK ? EXIT_OK : EXIT_FAILED;
}

/** Prometheus metrics fed by the runtime's events, when prom-client is installed. */
async function loadMetrics(store: CommandStore, logger: Logger): Promise<CommandMetrics | null> {
  try {
    const { createMetrics } = await import('@asynccmd/runtime/metrics');
    return createMetrics({ store });
  } catch (e) {
    if ((e as { code?: unknown } | null)?.code !== 'ERR_MODULE_NOT_FOUND') throw e;
    logger.warn({}, 'asynccmd worker: prom-client is not installed; /metrics is not served');
    return null;
  }
}
