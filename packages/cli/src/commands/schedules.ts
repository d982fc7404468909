import { isAsyncCommandError } from '@asynccmd/core';
import type { Command } from 'commander';
import {
  addSchedule,
  parseNewSchedule,
  readSchedules,
  removeSchedule,
  setSchedulePaused,
  type ScheduleView,
} from '@asynccmd/runtime/ops';
import { CliFailure, EXIT_FAILED, EXIT_USAGE } from '../failures.js';
import { parseCount } from '../arguments.js';
import { renderTable } from '../table.js';
import type { CliContext } from '../cli-context.js';

/** `asynccmd schedules …`: recurring schedules. */
export function registerSchedules(program: Command, cli: CliContext): void {
  const { out, json, withStore } = cli;
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
