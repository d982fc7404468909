import { LIMITS } from './limits.js';
import { InvalidArgumentError } from './errors.js';
import { MAX_DEPENDENCIES } from './ports/dependencies.js';
import type { DependencyFailureRule } from './ports/dependencies.js';

/** The most steps one workflow may have. */
export const MAX_WORKFLOW_STEPS = LIMITS.workflowSteps;
/**
 * The longest chain of steps one workflow may have (its layers). A cancellation or a dead letter
 * cascades down a chain inside one transaction, one nested trigger (or statement) per step, and the
 * databases bound that nesting (PostgreSQL's stack depth let about 500 through on the development
 * machine, SQLite stops at 1,000 trigger levels): this keeps every workflow well inside.
 */
export const MAX_WORKFLOW_DEPTH = LIMITS.workflowDepth;
/** The longest workflow id and step name, in characters. */
export const MAX_WORKFLOW_ID_CHARS = LIMITS.workflowIdChars;

/** A step as a workflow builder declares it, before anything is written. */
export interface WorkflowStepPlan {
  readonly name: string;
  /** Names of steps of the same workflow, or `{ id }` of a command outside it. */
  readonly dependsOn: readonly WorkflowDependencyPlan[];
}

export type WorkflowDependencyPlan =
  | { readonly step: string; readonly onFailure?: DependencyFailureRule }
  | { readonly id: string; readonly onFailure?: DependencyFailureRule };

/** A workflow whose steps depend on each other in a circle: none of them could ever start. */
export class WorkflowCycleError extends InvalidArgumentError {
  constructor(readonly steps: readonly string[]) {
    super(`the workflow's steps depend on each other in a cycle: ${steps.join(' → ')}`);
    this.name = 'WorkflowCycleError';
  }
}

/** A name that is 1..MAX_WORKFLOW_ID_CHARS characters without NUL. */
export function requireWorkflowName(what: string, value: unknown): string {
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > MAX_WORKFLOW_ID_CHARS ||
    value.includes('\u0000')
  ) {
    throw new InvalidArgumentError(`${what} must be 1..${MAX_WORKFLOW_ID_CHARS} characters without NUL`);
  }
  return value;
}

/**
 * Checks a workflow's graph before anything is written and answers its steps in layers: each
 * layer depends only on the layers before it (and on commands outside the workflow), so a store
 * inserts it layer by layer. Refuses (INVALID_ARGUMENT) no steps, more than MAX_WORKFLOW_STEPS, a
 * name used twice, a dependency on a step that is not declared, a step depending on the same
 * thing twice or on more than MAX_DEPENDENCIES, a chain longer than MAX_WORKFLOW_DEPTH, and a
 * cycle (WorkflowCycleError, naming it).
 */
export function planWorkflow<S extends WorkflowStepPlan>(steps: readonly S[]): S[][] {
  if (steps.length === 0) throw new InvalidArgumentError('a workflow needs at least one step');
  if (steps.length > MAX_WORKFLOW_STEPS) {
    throw new InvalidArgumentError(
      `a workflow has at most ${MAX_WORKFLOW_STEPS} steps (got ${steps.length})`,
    );
  }
  const byName = new Map<string, S>();
  for (const s of steps) {
    requireWorkflowName('a step name', s.name);
    if (byName.has(s.name)) throw new InvalidArgumentError(`step "${s.name}" is declared twice`);
    byName.set(s.name, s);
  }
  for (const s of steps) {
    if (s.dependsOn.length > MAX_DEPENDENCIES) {
      throw new InvalidArgumentError(`step "${s.name}" depends on more than ${MAX_DEPENDENCIES} commands`);
    }
    const seen = new Set<string>();
    for (const d of s.dependsOn) {
      const key = 'step' in d ? `step:${d.step}` : `id:${d.id}`;
      if (seen.has(key)) throw new InvalidArgumentError(`step "${s.name}" depends on ${key} twice`);
      seen.add(key);
      if ('step' in d && !byName.has(d.step)) {
        throw new InvalidArgumentError(
          `step "${s.name}" depends on "${d.step}", which is not a step of the workflow`,
        );
      }
    }
  }
  // Kahn's algorithm, by layers; what is left at the end lies on (or behind) a cycle.
  const pending = new Map<string, number>();
  const dependants = new Map<string, string[]>();
  for (const s of steps) {
    const inner = s.dependsOn.flatMap((d) => ('step' in d ? [d.step] : []));
    pending.set(s.name, inner.length);
    for (const d of inner) dependants.set(d, [...(dependants.get(d) ?? []), s.name]);
  }
  const layers: S[][] = [];
  let layer = steps.filter((s) => pending.get(s.name) === 0);
  let placed = 0;
  while (layer.length > 0) {
    layers.push(layer);
    placed += layer.length;
    const next: S[] = [];
    for (const s of layer) {
      for (const d of dependants.get(s.name) ?? []) {
        const left = (pending.get(d) ?? 0) - 1;
        pending.set(d, left);
        if (left === 0) next.push(byName.get(d)!);
      }
    }
    layer = next;
  }
  if (placed < steps.length) throw new WorkflowCycleError(findCycle(steps, pending));
  if (layers.length > MAX_WORKFLOW_DEPTH) {
    throw new InvalidArgumentError(
      `a workflow's longest chain of steps is at most ${MAX_WORKFLOW_DEPTH} steps (got ${layers.length})`,
    );
  }
  return layers;
}

/** One cycle among the steps Kahn's algorithm could not place, as the names around it. */
function findCycle(steps: readonly WorkflowStepPlan[], pending: ReadonlyMap<string, number>): string[] {
  const stuck = new Map(
    steps
      .filter((s) => (pending.get(s.name) ?? 0) > 0)
      .map((s) => [s.name, s.dependsOn.flatMap((d) => ('step' in d ? [d.step] : []))] as const),
  );
  // Every stuck step has a stuck dependency: walking them must come back to a step already seen.
  let at = stuck.keys().next().value as string;
  const path: string[] = [];
  const index = new Map<string, number>();
  while (!index.has(at)) {
    index.set(at, path.length);
    path.push(at);
    at = (stuck.get(at) ?? []).find((d) => stuck.has(d)) ?? at;
  }
  return [...path.slice(index.get(at)), at];
}

/** How a batch's members ended, as its callback counts them (from `ctx.dependencies()`). */
export interface BatchCounts {
  readonly succeeded: number;
  readonly dead: number;
  readonly cancelled: number;
  /** Not finished yet: zero when a callback that waits for every member with 'continue' runs. */
  readonly unfinished: number;
}

/** Counts `outcomes` by how they ended. */
export function batchCounts(outcomes: readonly { readonly status: string }[]): BatchCounts {
  let succeeded = 0;
  let dead = 0;
  let cancelled = 0;
  for (const o of outcomes) {
    if (o.status === 'SUCCESS') succeeded += 1;
    else if (o.status === 'DEAD') dead += 1;
    else if (o.status === 'CANCELLED') cancelled += 1;
  }
  return { succeeded, dead, cancelled, unfinished: outcomes.length - succeeded - dead - cancelled };
}
