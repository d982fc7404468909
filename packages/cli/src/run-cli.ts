import { describeFailure, isAsyncCommandError } from '@asynccmd/core';
import { Command, CommanderError } from 'commander';
import { createRequire } from 'node:module';
import { CliFailure, EXIT_FAILED, EXIT_OK, EXIT_USAGE } from './failures.js';
import { createCliContext, type CliIo } from './cli-context.js';
import { registerAdmin } from './commands/admin.js';
import { registerInspect } from './commands/inspect.js';
import { registerLimits } from './commands/limits.js';
import { registerMigrate } from './commands/migrate.js';
import { registerPauses } from './commands/pauses.js';
import { registerSchedules } from './commands/schedules.js';
import { registerWorker } from './commands/worker.js';
import { registerWorkflows } from './commands/workflows.js';

// src and dist both sit one level below the package root.
const VERSION = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

export type { CliIo } from './cli-context.js';
export { EXIT_FAILED, EXIT_OK, EXIT_USAGE } from './failures.js';

/** Runs `asynccmd <argv…>` and resolves to its exit code; never calls process.exit. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const cli = createCliContext(io);
  const program = new Command('asynccmd')
    .description('Inspect and steer asynccmd commands in a SQLite, PostgreSQL or MySQL/MariaDB database.')
    .version(VERSION)
    .option('--db <url>', 'database URL: sqlite:PATH, postgres://…, mysql://… (default: $ASYNCCMD_DB)')
    .option('--table <name>', 'command table (default async_command)')
    .option('--schema <name>', 'PostgreSQL schema (default public)')
    .option(
      '--pooler <mode>',
      'PostgreSQL: transaction when --db is a transaction pooler such as PgBouncer (default: $ASYNCCMD_PG_POOLER, else none)',
    )
    .option(
      '--listen-db <url>',
      'PostgreSQL: direct connection for LISTEN wake-ups when --db is a transaction pooler (default: $ASYNCCMD_PG_LISTEN_DB)',
    )
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr })
    .showHelpAfterError('(run asynccmd --help for usage)');

  registerMigrate(program, cli);
  registerInspect(program, cli);
  registerAdmin(program, cli);
  registerSchedules(program, cli);
  registerPauses(program, cli);
  registerLimits(program, cli);
  registerWorkflows(program, cli);
  registerWorker(program, cli);

  try {
    await program.parseAsync([...argv], { from: 'user' });
    return cli.exitCode;
  } catch (e) {
    if (e instanceof CommanderError) {
      // Commander has already printed its message (or the help / version text).
      return e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.exitCode === 0
        ? EXIT_OK
        : EXIT_USAGE;
    }
    if (e instanceof CliFailure) {
      io.stderr(`asynccmd: ${e.message}\n`);
      return e.exitCode;
    }
    if (isAsyncCommandError(e)) {
      io.stderr(`asynccmd: ${e.message}\n`);
      return e.code.startsWith('INVALID_') ? EXIT_USAGE : EXIT_FAILED;
    }
    io.stderr(`asynccmd: ${describeFailure(e)}\n`);
    return EXIT_FAILED;
  }
}
