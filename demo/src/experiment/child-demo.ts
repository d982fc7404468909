import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { DatabaseTarget } from '../db/database.js';

/** The built `npm start` entry (demo/dist/main.js), from src/ (tests) or dist/ (npm run experiment). */
export const DEMO_MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

const READY = /order demo listening on (http:\/\/\S+)/;
const live = new Set<ChildProcess>();
let exitHookInstalled = false;

export interface ChildDemo {
  readonly url: string;
  readonly child: ChildProcess;
  /** Whatever the child printed so far (for the report when something goes wrong). */
  output(): string;
  /** SIGKILL: no shutdown, no release of claims — a crash. Resolves once the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM: the graceful stop; SIGKILL if it takes longer than `timeoutMs`. */
  stop(timeoutMs?: number): Promise<void>;
}

/**
 * Starts the built demo server as a separate process (`--no-load`, a free port) on `target` (kept
 * when it stops) and waits for its ready line. Every child is SIGKILLed when this process exits, and stops by itself
 * when this process dies, so none outlives a failed test or an interrupted experiment.
 */
export async function startChildDemo(
  target: DatabaseTarget,
  extraArgs: readonly string[] = [],
  timeoutMs = 20_000,
): Promise<ChildDemo> {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const c of live) c.kill('SIGKILL');
    });
  }
  // stdin is a pipe the child watches (--exit-with-parent): if this process dies, even by SIGKILL,
  // the pipe closes and the child stops.
  const child = spawn(
    process.execPath,
    [
      DEMO_MAIN,
      '--no-load',
      '--exit-with-parent',
      '--port',
      '0',
      ...(target.dialect === 'sqlite'
        ? ['--db', target.file]
        : ['--db', target.url, '--schema', target.schema]),
      ...extraArgs,
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  live.add(child);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      live.delete(child);
      resolve();
    }),
  );
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the demo child printed no ready line within ${timeoutMs} ms:\n${output}`)),
      timeoutMs,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const m = READY.exec(output);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the demo child exited (${code ?? signal}) before it was ready:\n${output}`));
    });
  }).catch(async (e: unknown) => {
    child.kill('SIGKILL');
    await exited;
    throw e;
  });
  const signal = async (sig: NodeJS.Signals, graceMs: number): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(sig);
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  };
  return {
    url,
    child,
    output: () => output,
    kill: () => signal('SIGKILL', 0),
    stop: (graceMs = 10_000) => signal('SIGTERM', graceMs),
  };
}
