import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { WorkerStoreSpec } from './databases.js';

const WORKER = fileURLToPath(new URL('./worker.mjs', import.meta.url));

/**
 * The runtime's timing options a scenario sets; one it leaves out is the runtime's default. `{}`
 * is every default: what users run.
 */
export interface WorkerTiming {
  readonly leaseMs?: number;
  readonly heartbeatIntervalMs?: number;
  readonly pollIntervalMs?: number;
  readonly reclaimIntervalMs?: number;
}

export interface WorkerSpec extends WorkerTiming {
  readonly store: WorkerStoreSpec;
  readonly type: string;
  readonly log: string;
  /**
   * ASYNC_POOL: the shared pool runs this many at once with no queue (claims of at most this
   * many); undefined leaves the pool at its defaults (its adaptive queue claims up to 500 at once).
   */
  readonly concurrency?: number;
  /**
   * The executor's mode: ASYNC_POOL runs in the shared pool (see concurrency); SCHEDULED runs one
   * at a time in the poll loop with the runtime's default (adaptive) claim size.
   */
  readonly mode: 'ASYNC_POOL' | 'SCHEDULED';
  /**
   * Makes the executor transactional: in its attempt's transaction it inserts one row into `table`
   * (written as the dialect needs it, schema-qualified where it must be) and submits one follow-up.
   */
  readonly effects?: { readonly dialect: 'postgres' | 'mysql' | 'sqlite'; readonly table: string };
  /**
   * Runs a workflow's steps (of `type`, each execution named in the log and in its result) and its
   * batch callback (`<type>.callback`, transactional: one row into the `effects` table); see worker.mjs.
   */
  readonly workflow?: boolean;
}

/** Every worker process this test process started and has not seen exit: killed at exit at the latest. */
const alive = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of alive) child.kill('SIGKILL');
});

export interface WorkerProcess {
  readonly pid: number;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  /** What it wrote on stderr, for a failure message. */
  stderr(): string;
}

/** Starts a worker process and resolves once its runtime has started. */
export async function startWorker(spec: WorkerSpec): Promise<WorkerProcess> {
  const child = spawn(process.execPath, [WORKER], {
    env: { ...process.env, ASYNCCMD_FAULT_WORKER: JSON.stringify(spec) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  alive.add(child);
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4_000)));
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      alive.delete(child);
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('ready\n')) resolve();
    });
    void exited.then(() => reject(new Error(`worker exited before it was ready: ${err}`)));
  });
  return { pid: child.pid!, child, exited, stderr: () => err };
}

/** SIGKILL, and resolves once the process is gone. */
export async function killWorker(worker: WorkerProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  worker.child.kill(signal);
  await worker.exited;
}

/** Asks every worker to stop (SIGTERM, graceful), then SIGKILLs what is still there after 5 s. */
export async function stopWorkers(workers: readonly WorkerProcess[]): Promise<void> {
  await Promise.all(
    workers.map(async (w) => {
      if (w.child.exitCode !== null || w.child.signalCode !== null) return;
      w.child.kill('SIGCONT');
      w.child.kill('SIGTERM');
      const timer = setTimeout(() => w.child.kill('SIGKILL'), 5_000);
      await w.exited;
      clearTimeout(timer);
    }),
  );
}
