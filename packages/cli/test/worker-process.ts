import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// The built entry point, as npm links it (`npm test` builds first).
export const CLI_MAIN = join(dirname(fileURLToPath(import.meta.url)), '../dist/main.js');
export const WORKER_FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures');

export interface WorkerLogLine {
  readonly level: string;
  readonly msg?: string;
  readonly [field: string]: unknown;
}

/** `asynccmd worker` as a child process, its JSON log parsed line by line. */
export interface WorkerProcess {
  readonly child: ChildProcess;
  /** The variables given on top of the test's environment. */
  readonly env: Readonly<Record<string, string>>;
  /** Every log line so far (stdout must hold JSON lines only: a line that is not fails the parse). */
  log(): WorkerLogLine[];
  stderr(): string;
  /** Resolves with the admin URL (or null) once the worker logged that it started; rejects if it exits first. */
  readonly started: Promise<string | null>;
  /** The exit code (null when ended by a signal). */
  readonly exited: Promise<number | null>;
}

export function spawnWorker(
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
): WorkerProcess {
  const child = spawn(process.execPath, [CLI_MAIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const log = (): WorkerLogLine[] =>
    out
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as WorkerLogLine);
  const started = new Promise<string | null>((resolve, reject) => {
    const look = () => {
      const line = log().find((l) => l.msg === 'asynccmd worker started');
      if (line !== undefined) {
        child.stdout.off('data', look);
        resolve(typeof line['admin'] === 'string' ? line['admin'] : null);
      }
    };
    child.stdout.on('data', look);
    void exited.then(() => reject(new Error(`the worker exited before it started: ${err}`)));
  });
  started.catch(() => undefined);
  return { child, env, log, stderr: () => err, started, exited };
}
