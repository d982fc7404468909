import type { AnyExecutor, AsyncCommandsOptions, RecurringSchedule } from '@asynccmd/runtime';
import { CliFailure, EXIT_USAGE } from './failures.js';

/**
 * Runtime options a worker module may set. The CLI owns the store (`--db`), the log (JSON lines on
 * stdout) and the shared pool's size (`--concurrency`); `--pools` overrides the sizes given here.
 */
export type WorkerRuntimeOptions = Omit<AsyncCommandsOptions, 'store' | 'executors' | 'recurring' | 'logger'>;

/**
 * What `asynccmd worker --executors <module>` loads: the module's default export of this shape, or
 * the same three names as named exports (`export const executors = […]`).
 */
export interface WorkerModule {
  /** The executors this worker runs; it claims only their types. At least one. */
  readonly executors: readonly AnyExecutor[];
  /** Recurring schedules this worker enqueues the ticks of (with the other instances that declare them). */
  readonly recurring?: readonly RecurringSchedule[];
  readonly options?: WorkerRuntimeOptions;
}

/** Types a worker module's default export: `export default defineWorker({ executors: [...] })`. */
export function defineWorker(module: WorkerModule): WorkerModule {
  return module;
}

const FIELDS = ['executors', 'recurring', 'options'] as const;

/**
 * The worker module a loaded ES module holds: its default export when that has `executors`,
 * otherwise its named exports. Checks the shape only; the runtime checks each executor, schedule
 * and option when it is built.
 */
export function workerModuleOf(loaded: Readonly<Record<string, unknown>>, shown: string): WorkerModule {
  const fallback = loaded['default'];
  const source =
    fallback !== null && typeof fallback === 'object' && 'executors' in fallback
      ? (fallback as Readonly<Record<string, unknown>>)
      : loaded;
  const bad = (problem: string) =>
    new CliFailure(
      `the executors module ${shown} ${problem} (export \`executors\`, an array of executors, as a named ` +
        'export or in the default export; optionally `recurring` and `options`)',
      EXIT_USAGE,
    );
  const { executors, recurring, options } = Object.fromEntries(FIELDS.map((f) => [f, source[f]]));
  if (executors === undefined) throw bad('exports no `executors`');
  if (!Array.isArray(executors) || executors.length === 0) {
    throw bad('exports `executors` that is not a non-empty array');
  }
  for (const [i, e] of executors.entries()) {
    const executor = e as { type?: unknown; execute?: unknown } | null;
    if (typeof executor?.type !== 'string' || typeof executor.execute !== 'function') {
      throw bad(`has executors[${i}] that is not an executor ({ type, execute, … })`);
    }
  }
  if (recurring !== undefined && !Array.isArray(recurring))
    throw bad('exports `recurring` that is not an array');
  if (options !== undefined && (options === null || typeof options !== 'object' || Array.isArray(options))) {
    throw bad('exports `options` that is not an object');
  }
  for (const owned of ['store', 'executors', 'recurring', 'logger']) {
    if (options !== undefined && owned in (options as object)) {
      throw bad(`sets \`options.${owned}\`, which the worker command owns`);
    }
  }
  return {
    executors: executors as AnyExecutor[],
    ...(recurring !== undefined ? { recurring: recurring as RecurringSchedule[] } : {}),
    ...(options !== undefined ? { options: options as WorkerRuntimeOptions } : {}),
  };
}
