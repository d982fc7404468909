import type { Command } from 'commander';
import { CliFailure, EXIT_FAILED, EXIT_USAGE } from '../failures.js';
import { renderMigrationScript } from '../migration-text.js';
import type { CliContext } from '../cli-context.js';

/** `asynccmd migrate`: creates or upgrades the table, or prints its DDL. */
export function registerMigrate(program: Command, cli: CliContext): void {
  const { out, json, withStore } = cli;
  program
    .command('migrate')
    .description('create or upgrade the command table (idempotent), or print its DDL for a DBA')
    .option('--print-sql', 'print the DDL of the versions the database lacks, apply nothing')
    .option('--dry-run', 'the same as --print-sql')
    .option('--all', 'with --print-sql: every version, as for an empty database')
    .option('--json', 'machine-readable output')
    .action(
      async (opts: { printSql?: boolean; dryRun?: boolean; all?: boolean; json?: boolean }, cmd: Command) => {
        const printOnly = opts.printSql === true || opts.dryRun === true;
        if (opts.all === true && !printOnly) throw new CliFailure('--all goes with --print-sql', EXIT_USAGE);
        if (!printOnly) {
          return withStore(
            cmd,
            async (store) => {
              await store.migrate();
              if (opts.json) json({ migrated: true, dialect: store.dialect });
              else out(`migrated: the ${store.dialect} command table is up to date`);
            },
            true,
          );
        }
        // A dry run changes nothing: not even a SQLite file is created.
        await withStore(cmd, async (store) => {
          if (store.migrationScript === undefined) {
            throw new CliFailure(`the ${store.dialect} store cannot print its migrations`, EXIT_FAILED);
          }
          const script = await store.migrationScript({ all: opts.all === true });
          if (opts.json) return json({ dialect: store.dialect, ...script });
          out(renderMigrationScript(script, store.dialect));
        });
      },
    );
}
