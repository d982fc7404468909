import { isAsyncCommandError } from '@asynccmd/core';
import type { Command } from 'commander';
import { cancelWorkflowView, formatProgress, parseReason, readWorkflow } from '@asynccmd/runtime/ops';
import { CliFailure, EXIT_FAILED } from '../failures.js';
import { renderTable } from '../table.js';
import type { CliContext } from '../cli-context.js';

/** `asynccmd workflow show|cancel`: a workflow's steps and their states, and its cancellation. */
export function registerWorkflows(program: Command, cli: CliContext): void {
  const { out, json, withStore } = cli;
  const workflow = program
    .command('workflow')
    .description('workflows: show every step of one with its state, or cancel what has not started');
  const orFail = <T>(promise: Promise<T>): Promise<T> =>
    promise.catch((e: unknown) => {
      throw isAsyncCommandError(e) && e.code === 'NOT_FOUND' ? new CliFailure(e.message, EXIT_FAILED) : e;
    });
  workflow
    .command('show')
    .description(
      "a workflow's steps: name, command id, type, status and state, progress and what each waits for, and the workflow's progress",
    )
    .argument('<id>', 'workflow id')
    .option('--json', 'machine-readable output')
    .action(async (id: string, opts: { json?: boolean }, cmd: Command) =>
      withStore(cmd, async (store) => {
        const view = await orFail(readWorkflow(store, id));
        if (opts.json) return json(view);
        const { done, total, fraction } = view.progress;
        out(
          `workflow ${view.id}: ${view.state}, ${done} of ${total} step(s) finished, ${Math.floor(fraction * 100)}% done`,
        );
        out(
          renderTable(
            ['STEP', 'ID', 'TYPE', 'STATUS', 'STATE', 'PROGRESS', 'AFTER', 'LAST ERROR'],
            view.steps.map((s) => [
              s.name,
              s.id,
              s.type,
              s.status,
              s.state,
              formatProgress(s.progress),
              s.dependsOn.map((d) => d.step ?? `#${d.id}`).join(', '),
              s.lastError ?? '',
            ]),
          ),
        );
      }),
    );
  workflow
    .command('cancel')
    .description('cancel every step of a workflow that has not started (running steps finish)')
    .argument('<id>', 'workflow id')
    .option('--reason <text>', "recorded as the cancelled steps' last error")
    .option('--json', 'machine-readable output')
    .action(async (id: string, opts: { reason?: string; json?: boolean }, cmd: Command) =>
      withStore(cmd, async (store) => {
        const done = await orFail(cancelWorkflowView(store, id, parseReason(opts.reason)));
        if (opts.json) return json(done);
        out(`workflow ${id}: cancelled ${done.cancelled.length} step(s), now ${done.workflow.state}`);
      }),
    );
}
