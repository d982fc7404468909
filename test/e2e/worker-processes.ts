import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

/** Polls `condition` every 50 ms; fails with `what` after `timeoutMs`. */
export async function waitFor(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** Resolves once `child` has written `text` to its stdout; rejects if it exits first. */
export function lineOf(child: ChildProcess, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes(text)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`worker exited with ${code} before "${text}"`)));
  });
}

/**
 * Starts a worker script with its spec in ASYNCCMD_E2E_WORKER (JSON), stdout piped (for lineOf),
 * stdin piped when `stdin` says so.
 */
export function spawnWorker(script: string, spec: unknown, stdin = false): ChildProcess {
  return spawn(process.execPath, [script], {
    env: { ...process.env, ASYNCCMD_E2E_WORKER: JSON.stringify(spec) },
    stdio: [stdin ? 'pipe' : 'ignore', 'pipe', 'inherit'],
  });
}

/** SIGTERM to each worker; resolves once all have exited. */
export function stopWorkers(children: readonly ChildProcess[]): Promise<void> {
  return Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          child.once('exit', () => resolve());
          child.kill('SIGTERM');
        }),
    ),
  ).then(() => undefined);
}
