import {
  COMMAND_STATUSES,
  describeFailure,
  isAsyncCommandError,
  requireStoredType,
  type AdminTransition,
  type CommandId,
  type CommandRecord,
  type CommandStatus,
  type CommandStore,
} from '@asynccmd/core';
import { Command, CommanderError } from 'commander';
import * as E from 'fp-ts/lib/Either.js';
import { createRequire } from 'node:module';
import { purgeFinished } from '@asynccmd/runtime';
import {
  applyAdminTransition,
  DEFAULT_LIST_LIMIT,
  formatDuration,
  MAX_LIST_LIMIT,
  parseBizKey,
  parseCursor,
  parseDuration,
  parseReason,
  parseStatuses,
  parseType,
  parsePauseReason,
  readPausedTypes,
  setTypePaused,
  type PausedTypeView,
  addSchedule,
  parseNewSchedule,
  readSchedules,
  readStats,
  removeSchedule,
  requireCommandId,
  setSchedulePaused,
  type ScheduleView,
  toStatusListItem,
  toStatusResource,
  type CommandStatusResource,
} from '@asynccmd/runtime/ops';
import {
  CliFailure,
  databaseFailure,
  EXIT_FAILED,
  EXIT_OK,
  EXIT_USAGE,
  type FailureContext,
} from './failures.js';
import { openStore, redactUrl } from './open-store.js';
import { parseCount } from './arguments.js';
import { renderMigrationScript } from './migration-text.js';
import {
  ADMIN_TOKEN_VARIABLE,
  loadWorkerModule,
  parseWorkerFlags,
  runWorker,
  workerPoolSize,
  type WorkerFlags,
} from './worker.js';
import { clip, renderTable } from './table.js';

// src and dist both sit one level below the package root.
const VERSION = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

/** Where the CLI writes, and the environment it reads (ASYNCCMD_DB). */
export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Ends the process at once: `asynccmd worker` on a second SIGTERM. */
  readonly exit?: (code: number) => void;
}

export { EXIT_FAILED, EXIT_OK, EXIT_USAGE } from './failures.js';

interface GlobalOptions {
  readonly db?: string;
  readonly table?: string;
  readonly schema?: string;
  readonly pooler?: string;
  readonly listenDb?: string;
}

/** Runs `asynccmd <argv…>` and resolves to its exit code; never calls process.exit. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const env = io.env ?? {};
  const out = (text: string) => io.stdout(text.endsWith('\n') ? text : `${text}\n`);
  const json = (value: unknown) => out(JSON.stringify(value, null, 2));
  let exitCode = EXIT_OK;

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

  /** Opens the store the global options name, checks it answers, runs `fn`, closes it. */
  const withStore = async (
    cmd: Command,
    fn: (store: CommandStore) => Promise<void>,
    create = false,
    poolSize?: number,
  ): Promise<void> => {
    const g = cmd.optsWithGlobals<GlobalOptions>();
    const url = g.db ?? env['ASYNCCMD_DB'];
    if (url === undefined || url.trim() === '') {
      throw new CliFailure('no database: pass --db URL or set ASYNCCMD_DB', EXIT_USAGE);
    }
    const context: FailureContext = {
      table: [g.schema, g.table ?? 'async_command'].filter((part) => part !== undefined).join('.'),
    };
    // Our own errors keep their message (and exit code); a driver's is put in the CLI's words.
    const explained = (prefix: string) => (e: unknown) => {
      throw isAsyncCommandError(e) || e instanceof CliFailure ? e : databaseFailure(e, context, prefix);
    };
    const unreachable = explained(`cannot reach the database at ${redactUrl(url)}: `);
    const store = await openStore({
      url: url.trim(),
      ...(g.table !== undefined ? { table: g.table } : {}),
      ...(g.schema !== undefined ? { schema: g.schema } : {}),
      mustExist: !create,
      ...(poolSize !== undefined ? { poolSize } : {}),
      // The variables are for PostgreSQL URLs only: set for one database, they must not break a
      // command against another; the options are refused where they do not apply.
      ...optional('pooler', g.pooler ?? (postgresUrl(url) ? env['ASYNCCMD_PG_POOLER'] : undefined)),
      ...optional('listenUrl', g.listenDb ?? (postgresUrl(url) ? env['ASYNCCMD_PG_LISTEN_DB'] : undefined)),
    }).catch(unreachable);
    try {
      await store.ping().catch(unreachable);
      await fn(store).catch(explained(''));
    } finally {
      await store.close().catch(() => undefined);
    }
  };

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

  program
    .command('stats')
    .description('counts by status and type, and the age of the oldest due pending command')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }, cmd: Command) =>
      withStore(cmd, async (store) => {
        const stats = await readStats(store);
        if (opts.json) return json(stats);
        const row = (label: string, counts: Readonly<Record<CommandStatus, number>>) => [
          label,
          ...COMMAND_STATUSES.map((s) => String(counts[s])),
        ];
        const types = Object.entries(stats.byType).sort(([a], [b]) => a.localeCompare(b));
        out(
          renderTable(
            ['TYPE', ...COMMAND_STATUSES],
            [...types.map(([type, counts]) => row(type, counts)), row('(all)', stats.byStatus)],
          ),
        );
        out(
          stats.oldestDueAt === null
            ? 'oldest due pending: none waiting'
            : `oldest due pending: waiting ${formatDuration(stats.oldestPendingAgeMs ?? 0)} (due ${stats.oldestDueAt})`,
        );
        // The stored limits every instance's claims enforce, beside what runs of each type now.
        if (stats.typeLimits.length > 0) {
          out('');
          out(
            renderTable(
              ['LIMITED TYPE', 'MAX RUNNING', 'RUNNING'],
              stats.typeLimits.map((l) => [
                l.type,
                String(l.maxRunning),
                String(stats.byType[l.type]?.RUNNING ?? 0),
              ]),
            ),
          );
        }
        if (stats.pausedTypes.length > 0) {
          out('');
          out(pausedTable(stats.pausedTypes, stats.byType));
        }
      }),
    );

  program
    .command('list')
    .description('list commands, newest first')
    .option('--status <statuses>', 'PENDING, RUNNING, SUCCESS, DEAD or CANCELLED (comma-separated)')
    .option('--type <type>', 'only this command type')
    .option('--biz-key <key>', 'only this business key')
    .option('--limit <n>', `at most this many (1-1000, default ${DEFAULT_LIST_LIMIT})`)
    .option('--cursor <cursor>', 'continue after a previous page')
    .option('--json', 'machine-readable output')
    .action(
      async (
        opts: {
          status?: string;
          type?: string;
          bizKey?: string;
          limit?: string;
          cursor?: string;
          json?: boolean;
        },
        cmd: Command,
      ) => {
        const query = {
          ...(opts.status !== undefined ? { status: parseStatuses(opts.status) } : {}),
          ...(opts.type !== undefined ? { type: parseType(opts.type) } : {}),
          ...(opts.bizKey !== undefined ? { bizKey: parseBizKey(opts.bizKey) } : {}),
          ...(opts.cursor !== undefined ? { cursor: parseCursor(opts.cursor) } : {}),
          limit:
            opts.limit !== undefined ? parseCount('--limit', opts.limit, MAX_LIST_LIMIT) : DEFAULT_LIST_LIMIT,
        };
        await withStore(cmd, async (store) => {
          const page = await store.list(query);
          if (opts.json) {
            // As GET /commands: the items leave the results out (`show` has them).
            return json({ items: page.items.map((c) => toStatusListItem(c)), nextCursor: page.nextCursor });
          }
          if (page.items.length === 0) return out('no commands match');
          out(
            renderTable(
              ['ID', 'STATUS', 'TYPE', 'BIZ KEY', 'PRIORITY', 'FAILED', 'NEXT RUN AT', 'LAST ERROR'],
              page.items.map((c) => [
                c.id,
                c.status,
                c.type,
                c.bizKey ?? '',
                String(c.priority),
                `${c.retryCount}/${c.maxRetry + 1}`,
                c.nextRunAt.toISOString(),
                clip(c.lastError, 60),
              ]),
            ),
          );
          if (page.nextCursor !== null) out(`more: --cursor ${page.nextCursor}`);
        });
      },
    );

  program
    .command('show')
    .description('everything about one command, payload and result included')
    .argument('<id>', 'command id')
    .option('--json', 'machine-readable output')
    .action(async (idText: string, opts: { json?: boolean }, cmd: Command) => {
      const id = requireCommandId(idText);
      await withStore(cmd, async (store) => {
        const c = await store.get(id);
        if (c === null) throw new CliFailure(`command ${id} does not exist`, EXIT_FAILED);
        const detail = {
          ...toStatusResource(c),
          payload: c.payload,
          headers: c.headers,
          leaseUntil: c.leaseUntil,
        };
        if (opts.json) return json(detail);
        out(describeCommand(c));
      });
    });

  const transitionCommand = (name: AdminTransition, description: string, withReason: boolean) => {
    const sub = program
      .command(name)
      .description(description)
      .argument('<id>', 'command id')
      .option('--json', 'machine-readable output');
    if (withReason) sub.option('--reason <text>', 'why (kept as the last error)');
    sub.action(async (idText: string, opts: { json?: boolean; reason?: string }, cmd: Command) => {
      const id = requireCommandId(idText);
      const reason = parseReason(opts.reason);
      await withStore(cmd, async (store) => {
        const c = await transitionOrFail(store, name, id, reason);
        if (opts.json) json(toStatusResource(c));
        else out(`command ${c.id}: ${name} done, now ${c.status}`);
      });
    });
  };

  program
    .command('retry')
    .description('dead letter(s) back to PENDING with fresh attempts, due now')
    .argument('[id]', 'command id')
    .option('--all-dead', 'every dead letter (with --type: of that type)')
    .option('--type <type>', 'with --all-dead: only this command type')
    .option('--json', 'machine-readable output')
    .action(
      async (idText: string | undefined, opts: { allDead?: boolean; type?: string; json?: boolean }, cmd) => {
        if ((idText === undefined) === (opts.allDead !== true)) {
          throw new CliFailure('retry takes either an ID or --all-dead', EXIT_USAGE);
        }
        if (opts.type !== undefined && !opts.allDead)
          throw new CliFailure('--type goes with --all-dead', EXIT_USAGE);
        if (idText !== undefined) {
          const id = requireCommandId(idText);
          return withStore(cmd as Command, async (store) => {
            const c = await transitionOrFail(store, 'retry', id);
            if (opts.json) json(toStatusResource(c));
            else out(`command ${c.id}: retry done, now ${c.status}`);
          });
        }
        const type = opts.type === undefined ? undefined : parseType(opts.type);
        await withStore(cmd as Command, async (store) => {
          const { retried, failed } = await retryAllDead(store, type);
          if (opts.json) json({ retried, failed });
          else {
            out(`retried ${retried.length} dead command(s)`);
            for (const f of failed) io.stderr(`command ${f.id}: ${f.error.message}\n`);
          }
          if (failed.length > 0) exitCode = EXIT_FAILED;
        });
      },
    );

  transitionCommand('requeue', 'force a RUNNING (hung) command back to PENDING, due now', false);
  transitionCommand('kill', 'dispose of a PENDING, RUNNING or DEAD command (→ CANCELLED)', true);
  transitionCommand('cancel', 'cancel a command that has not started (PENDING → CANCELLED)', true);

  program
    .command('purge')
    .description('delete finished commands (SUCCESS, CANCELLED; DEAD only with --include-dead)')
    .requiredOption('--older-than <duration>', 'finished longer ago than this, e.g. 7d, 12h, 30m')
    .option('--include-dead', 'delete dead letters too')
    .option('--batch-size <n>', 'rows per DELETE (default 1000)')
    .option('--json', 'machine-readable output')
    .action(
      async (
        opts: { olderThan: string; includeDead?: boolean; batchSize?: string; json?: boolean },
        cmd: Command,
      ) => {
        const olderThanMs = parseDuration(opts.olderThan);
        const batchSize =
          opts.batchSize === undefined
            ? undefined
            : parseCount('--batch-size', opts.batchSize, MAX_PURGE_BATCH_SIZE);
        await withStore(cmd, async (store) => {
          const r = await purgeFinished(store, {
            olderThanMs,
            includeDead: opts.includeDead === true,
            ...(batchSize !== undefined ? { batchSize } : {}),
          });
          if (opts.json)
            json({ deleted: r.deleted, batches: r.batches, olderThan: r.olderThan.toISOString() });
          else
            out(`purged ${r.deleted} finished command(s) that finished before ${r.olderThan.toISOString()}`);
        });
      },
    );

  const schedules = program
    .command('schedules')
    .description(
      'recurring schedules: list them with their last and next ticks, pause, resume, add or remove one',
    );
  schedules
    .command('list')
    .description('every stored schedule, its state, last tick and next tick')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }, cmd: Command) =>
      withStore(cmd, async (store) => {
        const views = await readSchedules(store, new Date());
        if (opts.json) return json({ items: views });
        if (views.length === 0) return out('no recurring schedules');
        out(
          renderTable(
            ['NAME', 'TYPE', 'CRON', 'TIMEZONE', 'STATE', 'LAST TICK', 'NEXT TICK', 'ORIGIN'],
            views.map((v) => scheduleRow(v)),
          ),
        );
      }),
    );
  for (const [action, paused] of [
    ['pause', true],
    ['resume', false],
  ] as const) {
    schedules
      .command(action)
      .description(
        paused
          ? 'stop enqueueing the ticks of a schedule, on every instance'
          : 'enqueue the ticks of a paused schedule again from now on (those of the pause are skipped)',
      )
      .argument('<name>', 'schedule name')
      .option('--json', 'machine-readable output')
      .action(async (name: string, opts: { json?: boolean }, cmd: Command) =>
        withStore(cmd, async (store) => {
          const view = await setSchedulePaused(store, name, paused, new Date()).catch((e: unknown) => {
            throw isAsyncCommandError(e) && e.code === 'NOT_FOUND'
              ? new CliFailure(e.message, EXIT_FAILED)
              : e;
          });
          if (opts.json) json(view);
          else
            out(
              `schedule ${view.name}: ${view.paused ? 'paused' : `running, next tick ${view.nextTick ?? '-'}`}`,
            );
        }),
      );
  }

  schedules
    .command('add')
    .description(
      'add a schedule at run time: every instance with an executor for its type enqueues its ticks',
    )
    .argument('<name>', 'schedule name (letters, digits, _ . : -)')
    .requiredOption('--cron <expression>', "5 fields, or 6 with seconds first, e.g. '0 */5 * * * *'")
    .requiredOption('--type <type>', 'the command type each tick submits')
    .option('--timezone <zone>', 'IANA time zone the expression is read in (default UTC)')
    .option('--payload <json>', "the payload of every tick's command, as JSON (default null)")
    .option(
      '--catch-up <policy>',
      'ticks missed while every instance was down: none (default), latest or a count',
    )
    .option('--max-retry <n>', "retries of each tick's command (default: the executor's)")
    .option('--json', 'machine-readable output')
    .action(
      async (
        name: string,
        opts: {
          cron: string;
          type: string;
          timezone?: string;
          payload?: string;
          catchUp?: string;
          maxRetry?: string;
          json?: boolean;
        },
        cmd: Command,
      ) => {
        const input = {
          name,
          cron: opts.cron,
          type: opts.type,
          ...(opts.timezone !== undefined ? { timezone: opts.timezone } : {}),
          ...(opts.payload !== undefined ? { payload: parseJsonOption('--payload', opts.payload) } : {}),
          ...(opts.catchUp !== undefined ? { catchUp: parseCatchUp(opts.catchUp) } : {}),
          ...(opts.maxRetry !== undefined
            ? { maxRetry: parseCount('--max-retry', opts.maxRetry, 1000, 0) }
            : {}),
        };
        // Checked before the database is asked (the CLI cannot know which types some instance runs).
        parseNewSchedule(input, null);
        await withStore(cmd, async (store) => {
          const view = await addSchedule(store, input, new Date(), null).catch((e: unknown) => {
            throw isAsyncCommandError(e) && e.code === 'SCHEDULE_EXISTS'
              ? new CliFailure(e.message, EXIT_FAILED)
              : e;
          });
          if (opts.json) json(view);
          else
            out(
              `schedule ${view.name} added: ${view.type} on "${view.cron}", next tick ${view.nextTick ?? '-'}`,
            );
        });
      },
    );
  schedules
    .command('remove')
    .description('remove a schedule added at run time: no instance enqueues its ticks any more')
    .argument('<name>', 'schedule name')
    .option('--json', 'machine-readable output')
    .action(async (name: string, opts: { json?: boolean }, cmd: Command) =>
      withStore(cmd, async (store) => {
        const result = await removeSchedule(store, name).catch((e: unknown) => {
          throw isAsyncCommandError(e) && (e.code === 'NOT_FOUND' || e.code === 'SCHEDULE_DECLARED_IN_CODE')
            ? new CliFailure(e.message, EXIT_FAILED)
            : e;
        });
        if (opts.json) json(result);
        else out(`schedule ${result.name} removed`);
      }),
    );

  const typePauseAction =
    (paused: boolean) =>
    async (type: string, opts: { reason?: string; json?: boolean }, cmd: Command): Promise<void> => {
      // Checked before the database is asked, as every argument of the CLI.
      requireStoredType('a type pause', type);
      const reason = parsePauseReason(opts.reason);
      await withStore(cmd, async (store) => {
        const change = await setTypePaused(store, type, paused, reason ?? undefined);
        if (opts.json) return json(change);
        const outcome = change.changed
          ? paused
            ? 'paused'
            : 'resumed'
          : paused
            ? 'was paused already'
            : 'was not paused';
        // Quoted: a type may hold any character, a terminal's control codes included.
        out(`type ${JSON.stringify(change.type)}: ${outcome}`);
      });
    };
  program
    .command('pause')
    .description(
      'pause a command type on every instance: its PENDING commands wait, submits are still accepted',
    )
    .argument('<type>', 'command type')
    .option('--reason <text>', 'why (shown with the paused types)')
    .option('--json', 'machine-readable output')
    .action(typePauseAction(true));
  program
    .command('resume')
    .description('let the PENDING commands of a paused type run again, on every instance')
    .argument('<type>', 'command type')
    .option('--json', 'machine-readable output')
    .action(typePauseAction(false));
  program
    .command('paused')
    .description('the command types paused for every instance, since when and why')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }, cmd: Command) =>
      withStore(cmd, async (store) => {
        if (opts.json) return json({ items: await readPausedTypes(store) });
        const stats = await readStats(store);
        if (stats.pausedTypes.length === 0) return out('no paused types');
        out(pausedTable(stats.pausedTypes, stats.byType));
      }),
    );

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
          exitCode = await runWorker(store, module, settings, {
            log: io.stdout,
            env,
            ...(io.exit !== undefined ? { exit: io.exit } : {}),
          });
        },
        false,
        workerPoolSize(module, settings),
      );
    });

  try {
    await program.parseAsync([...argv], { from: 'user' });
    return exitCode;
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

function postgresUrl(url: string): boolean {
  return /^\s*postgres(ql)?:/i.test(url);
}

/** `{ [key]: value }` for a value given and not blank, else nothing (an empty variable is unset). */
function optional<K extends string>(key: K, value: string | undefined): { [P in K]?: string } {
  return value === undefined || value.trim() === '' ? {} : ({ [key]: value.trim() } as { [P in K]?: string });
}

function scheduleRow(v: ScheduleView): string[] {
  return [
    v.name,
    v.type,
    v.cron,
    v.timezone ?? 'UTC',
    v.paused ? 'paused' : 'running',
    v.lastTick ?? '-',
    v.nextTick ?? '-',
    v.origin,
  ];
}

/** The paused types, with the PENDING commands each holds back. */
function pausedTable(
  paused: readonly PausedTypeView[],
  byType: Readonly<Record<string, Readonly<Record<CommandStatus, number>>>>,
): string {
  return renderTable(
    ['PAUSED TYPE', 'PAUSED AT', 'PENDING', 'REASON'],
    paused.map((p) => [p.type, p.pausedAt, String(byType[p.type]?.PENDING ?? 0), clip(p.reason, 60)]),
  );
}

/** The most rows one purge DELETE may take. */
const MAX_PURGE_BATCH_SIZE = 100_000;

async function transitionOrFail(
  store: CommandStore,
  name: AdminTransition,
  id: CommandId,
  reason?: string,
): Promise<CommandRecord> {
  const result = await applyAdminTransition(store, name, id, reason);
  if (E.isLeft(result)) throw new CliFailure(result.left.message, EXIT_FAILED);
  return result.right;
}

/**
 * Retries every dead letter, paging by cursor so a command whose retry is refused (its idempotency
 * key is held by a newer command) is reported once and not retried forever.
 */
async function retryAllDead(
  store: CommandStore,
  type: string | undefined,
): Promise<{ retried: CommandId[]; failed: { id: CommandId; error: { code: string; message: string } }[] }> {
  const retried: CommandId[] = [];
  const failed: { id: CommandId; error: { code: string; message: string } }[] = [];
  let cursor: string | null = null;
  do {
    const page = await store.list({
      status: 'DEAD',
      limit: 200,
      ...(type !== undefined ? { type } : {}),
      ...(cursor !== null ? { cursor } : {}),
    });
    for (const c of page.items) {
      const result = await applyAdminTransition(store, 'retry', c.id);
      if (E.isRight(result)) retried.push(c.id);
      else failed.push({ id: c.id, error: { code: result.left.code, message: result.left.message } });
    }
    cursor = page.nextCursor;
  } while (cursor !== null);
  return { retried, failed };
}

function describeCommand(c: CommandRecord): string {
  const view = toStatusResource(c);
  const iso = (d: Date | null) => d?.toISOString() ?? '-';
  const lines: [string, string][] = [
    ['id', c.id],
    ['type', c.type],
    ['bizKey', c.bizKey ?? '-'],
    ['status', `${c.status} (${view.operation})`],
    [
      'attempts',
      `${c.retryCount} failed, reclaimed after a lost lease ${c.rescueCount} time${c.rescueCount === 1 ? '' : 's'}; ` +
        `${view.attempts.retriesLeft} of ${c.maxRetry} retries left`,
    ],
    ['nextRunAt', iso(c.nextRunAt)],
    ['priority', String(c.priority)],
    ['orderingKey', c.orderingKey ?? '-'],
    ['lastError', c.lastError ?? '-'],
    ['owner', c.owner ?? '-'],
    ['createdAt', iso(c.createdAt)],
    ['updatedAt', iso(c.updatedAt)],
    ['startedAt', iso(c.startedAt)],
    ['finishedAt', iso(c.finishedAt)],
    ['leaseUntil', iso(c.leaseUntil)],
    ['headers', JSON.stringify(c.headers)],
    ['history', describeHistory(view.history)],
    // Pretty-printed as the payload; null until SUCCESS and when the executor left none.
    ['result', view.result === null ? '-' : JSON.stringify(view.result, null, 2)],
    ['payload', JSON.stringify(c.payload, null, 2)],
  ];
  return lines.map(([k, v]) => `${k.padEnd(11)} ${v}`).join('\n');
}

/** One attempt a line, oldest first, under the first line's label. */
function describeHistory(history: CommandStatusResource['history']): string {
  if (history.length === 0) return '-';
  return history
    .map((a, i) => {
      const line = `${i + 1}. ${a.outcome}, on ${a.instance ?? '-'}, ${a.startedAt ?? '-'} → ${a.finishedAt}`;
      return a.error === null ? line : `${line}: ${a.error}`;
    })
    .join(`\n${' '.repeat(12)}`);
}

function parseJsonOption(option: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new CliFailure(`${option} must be JSON, e.g. '{"report":"daily"}'`, EXIT_USAGE);
  }
}

function parseCatchUp(text: string): 'none' | 'latest' | number {
  if (text === 'none' || text === 'latest') return text;
  return parseCount('--catch-up', text, 1000);
}
