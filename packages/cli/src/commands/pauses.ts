import { requireStoredType, type CommandStatus } from '@asynccmd/core';
import type { Command } from 'commander';
import {
  parsePauseReason,
  readPausedTypes,
  setTypePaused,
  type PausedTypeView,
  readStats,
} from '@asynccmd/runtime/ops';
import { clip, renderTable } from '../table.js';
import type { CliContext } from '../cli-context.js';

/** `asynccmd pause`, `resume` and `paused`: type pauses for every instance. */
export function registerPauses(program: Command, cli: CliContext): void {
  const { out, json, withStore } = cli;
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
}

export /** The paused types, with the PENDING commands each holds back. */
function pausedTable(
  paused: readonly PausedTypeView[],
  byType: Readonly<Record<string, Readonly<Record<CommandStatus, number>>>>,
): string {
  return renderTable(
    ['PAUSED TYPE', 'PAUSED AT', 'PENDING', 'REASON'],
    paused.map((p) => [p.type, p.pausedAt, String(byType[p.type]?.PENDING ?? 0), clip(p.reason, 60)]),
  );
}
