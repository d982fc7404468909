import { spawn, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';

/** Busy-loop processes, one per core, that keep the machine loaded while a scenario runs. */
export interface BusyCores {
  readonly processes: number;
  stop(): Promise<void>;
}

/**
 * Starts one spinning process per core (`perCore` each): timing bugs hide on an idle machine, and
 * production clusters run beside other work. They exit with this process at the latest (their
 * stdin is a pipe from it), and stop() kills them.
 */
export function busyCores(perCore = 1): BusyCores {
  const children: ChildProcess[] = Array.from({ length: availableParallelism() * perCore }, () =>
    spawn(
      process.execPath,
      [
        '-e',
        "process.stdin.on('close', () => process.exit(0)); setImmediate(function spin() { const end = Date.now() + 50; while (Date.now() < end); setImmediate(spin); });",
      ],
      {
        stdio: ['pipe', 'ignore', 'ignore'],
      },
    ),
  );
  return {
    processes: children.length,
    async stop() {
      await Promise.all(
        children.map(
          (child) =>
            new Promise<void>((resolve) => {
              if (child.exitCode !== null || child.signalCode !== null) return resolve();
              child.once('exit', () => resolve());
              child.kill('SIGKILL');
            }),
        ),
      );
    },
  };
}
