import type { CommandStore } from '@asynccmd/core';
import { requireWorkflowName } from '@asynccmd/core';
import { cancelWorkflow, workflowStatus, type WorkflowStatus } from '../workflow.js';
import { HttpError } from './http-response.js';
import { statusPath } from './status-resource.js';

/** A workflow's status resource as the admin API and the CLI show it: each step with its link. */
export interface WorkflowView extends WorkflowStatus {
  /** Whether polling may stop: no step is unfinished. */
  readonly terminal: boolean;
  readonly links: { readonly steps: Readonly<Record<string, string>> };
}

/** The view of workflow `id`, or a 404 (NOT_FOUND) when there is none. */
export async function readWorkflow<Tx>(
  store: CommandStore<Tx>,
  id: string,
  linkBase = '',
): Promise<WorkflowView> {
  const status = await workflowStatus(store, requireWorkflowName('a workflow id', id));
  if (status === null) throw new HttpError(404, 'NOT_FOUND', `workflow ${JSON.stringify(id)} does not exist`);
  return {
    ...status,
    terminal: status.progress.done === status.progress.total,
    links: { steps: Object.fromEntries(status.steps.map((s) => [s.name, statusPath(s.id, linkBase)])) },
  };
}

/** Cancels what of workflow `id` has not started; answers the ids cancelled and the workflow as it now is. */
export async function cancelWorkflowView<Tx>(
  store: CommandStore<Tx>,
  id: string,
  reason: string | undefined,
  linkBase = '',
): Promise<{ readonly cancelled: readonly string[]; readonly workflow: WorkflowView }> {
  await readWorkflow(store, id, linkBase);
  const cancelled = await cancelWorkflow(store, id, reason);
  return { cancelled, workflow: await readWorkflow(store, id, linkBase) };
}
