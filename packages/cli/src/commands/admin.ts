import { type AdminTransition, type CommandId, type CommandRecord, type CommandStore } from '@asynccmd/core';
import type { Command } from 'commander';
import * as E from 'fp-ts/lib/Either.js';
import { purgeFinished } from '@asynccmd/runtime';
import {
  applyAdminTransition,
  parseDuration,
  parseReason,
  parseType,
  requireCommandId,
  toStatusResource,
} from '@asynccmd/runtime/ops';
import { CliFailure, EXIT_FAILED, EXIT_USAGE } from '../failures.js';
import { parseCount } from '../arguments.js';
import type { CliContext } from '../cli-context.js';

/** `asynccmd retry`, `requeue`, `kill`, `cancel` and `purge`: the admin transitions. */
export function registerAdmin(program: Command, cli: CliContext): void {
  const { out, json, withStore, io } = cli;
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
          if (failed.length > 0) cli.exitCode = EXIT_FAILED;
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
