import type { Command } from 'commander';
import {
  ADMIN_TOKEN_VARIABLE,
  loadWorkerModule,
  parseWorkerFlags,
  runWorker,
  workerPoolSize,
  type WorkerFlags,
} from '../worker.js';
import type { CliContext } from '../cli-context.js';

/** `asynccmd worker`: runs a module's executors until a signal. */
export function registerWorker(program: Command, cli: CliContext): void {
  const { withStore, env, io } = cli;
  program
    .command('worker')
    .description('run the executors (and recurring schedules) of a module until SIGTERM or SIGINT')
    .requiredOption(
      '--executors <module>',
      'ES module exporting `executors` (and optionally `recurring`, `options`)',
    )
    .option('--pools <sizes>', 'sizes of isolated pools, e.g. emails=4,reports=2')
    .option('--concurrency <n>', "size of the shared pool (default: the module's options, else 8)")
    .option(
      '--admin-port <port>',
      `serve the admin API (/health, /metrics, …); token from $${ADMIN_TOKEN_VARIABLE}`,
    )
    .option('--admin-host <host>', 'address the admin API listens on (default 127.0.0.1)')
    .option('--admin-no-auth', 'serve the admin API without a token (loopback only)')
    .option('--shutdown-timeout <duration>', 'how long SIGTERM waits for running commands (default 30s)')
    .option('--log-level <level>', 'debug, info, warn or error (default info)')
    .action(async (flags: WorkerFlags, cmd: Command) => {
      const settings = parseWorkerFlags(flags, env);
      const module = await loadWorkerModule(settings.modulePath);
      await withStore(
        cmd,
        async (store) => {
          cli.exitCode = await runWorker(store, module, settings, {
            log: io.stdout,
            env,
            ...(io.exit !== undefined ? { exit: io.exit } : {}),
          });
        },
        false,
        workerPoolSize(module, settings),
      );
    });
}
