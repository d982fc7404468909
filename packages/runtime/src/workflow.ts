import { randomUUID } from 'node:crypto';
import {
  InvalidArgumentError,
  operationState,
  planWorkflow,
  requireWorkflowName,
  type CommandId,
  type CommandProgress,
  type CommandRecord,
  type CommandStore,
  type DependencyFailureRule,
  type DependencyStore,
  type NewCommand,
  type OperationState,
  type WorkflowDependencyPlan,
} from '@asynccmd/core';
import type { CommandTypeMap } from './executor.js';
import {
  SUBMIT_OPTION_NAMES,
  toNewCommand,
  type SubmitOptions,
  type SubmitRules,
} from './submit-validation.js';

type TypeOf<TM> = keyof TM & string;

/** One dependency of a step: another step of the workflow by name, or a command by `{ id }`. */
export type StepDependency =
  | string
  | { readonly step: string; readonly onFailure?: DependencyFailureRule }
  | { readonly id: CommandId; readonly onFailure?: DependencyFailureRule };

/** A step's options: a submit's, and what it waits for. */
export interface WorkflowStepOptions extends SubmitOptions {
  /**
   * What the step waits for; none: it is PENDING at once. When one of them ends DEAD or CANCELLED,
   * the step is cancelled (onFailure 'cancel', the default) or runs anyway ('continue').
   */
  readonly dependsOn?: readonly StepDependency[];
}

/** A submitted workflow: its id and each step's command id, by step name. */
export interface SubmittedWorkflow {
  readonly id: string;
  readonly steps: Readonly<Record<string, CommandId>>;
}

/**
 * A workflow built inside a transactional executor (`ctx.workflow(id)`): steps as on
 * WorkflowBuilder, and `submit()` writes them in the attempt's transaction, so the workflow exists
 * if and only if the attempt succeeds (its IMMEDIATE roots start after the commit).
 */
export interface AttemptWorkflow<TM extends CommandTypeMap = CommandTypeMap> {
  readonly id: string;
  /** Adds a step named `name` (unique in the workflow) running `type` with `payload`. */
  step<K extends TypeOf<TM>>(name: string, type: K, payload: TM[K], options?: WorkflowStepOptions): this;
  /** Writes the workflow in the attempt's transaction; after the attempt is over, TRANSACTION_CLOSED. */
  submit(): Promise<SubmittedWorkflow>;
}

/** What the builder needs of the client it came from. */
export interface WorkflowClientParts<Tx> {
  readonly store: CommandStore<Tx>;
  readonly rules: SubmitRules;
  /** client.transaction, so IMMEDIATE roots are dispatched after its commit. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /** Tells the client a command was submitted in `tx` (after-commit dispatch and events). */
  submitted(tx: Tx, id: CommandId, type: string): void;
}

interface PlannedStep {
  readonly name: string;
  readonly command: NewCommand;
  readonly dependsOn: readonly WorkflowDependencyPlan[];
}

const STEP_OPTION_NAMES: readonly string[] = [...SUBMIT_OPTION_NAMES, 'dependsOn'];

/** The workflow store of `store`, or INVALID_ARGUMENT: workflows need one (every adapter here has it). */
export function requireDependencies<Tx>(store: CommandStore<Tx>): DependencyStore<Tx> {
  if (store.dependencies === undefined) {
    throw new InvalidArgumentError(`the ${store.dialect} store has no dependencies: it cannot run workflows`);
  }
  return store.dependencies;
}

/**
 * A workflow under construction: `step` adds steps (each validated as a submit is, at once),
 * `submit` / `submitInTx` write them all in one transaction, the graph checked (cycles, unknown
 * steps, the size limit: core planWorkflow) before anything is written. See docs/workflows.md.
 */
export class WorkflowBuilder<TM extends CommandTypeMap = CommandTypeMap, Tx = unknown> {
  readonly id: string;
  readonly #steps: PlannedStep[] = [];
  #submitted = false;

  constructor(
    private readonly client: WorkflowClientParts<Tx>,
    id?: string,
  ) {
    this.id = requireWorkflowName('a workflow id', id ?? randomUUID());
  }

  /** Adds a step named `name` (unique in the workflow) running `type` with `payload`. */
  step<K extends TypeOf<TM>>(name: string, type: K, payload: TM[K], options?: WorkflowStepOptions): this {
    if (this.#submitted) throw new InvalidArgumentError('this workflow was submitted already');
    requireWorkflowName('a step name', name);
    const { dependsOn = [], ...submitOptions } = (options ?? {}) as WorkflowStepOptions;
    if (!Array.isArray(dependsOn)) throw new InvalidArgumentError('dependsOn must be an array');
    const command = toNewCommand(
      this.client.rules,
      type,
      payload,
      submitOptions,
      STEP_OPTION_NAMES,
      `step "${name}" options`,
    );
    const deps = dependsOn.map((d: StepDependency): WorkflowDependencyPlan => {
      if (typeof d === 'string') return { step: d };
      if (typeof d === 'object' && d !== null && ('step' in d || 'id' in d)) return d;
      throw new InvalidArgumentError(`step "${name}": a dependency is a step name, { step } or { id }`);
    });
    this.#steps.push({ name, command, dependsOn: deps });
    return this;
  }

  /** Submits the workflow in a transaction of its own (client.transaction). */
  submit(): Promise<SubmittedWorkflow> {
    this.#plan();
    return this.client.transaction((tx) => this.submitInTx(tx));
  }

  /**
   * Submits the workflow in the caller's transaction: it exists if and only if that transaction
   * commits (a rollback leaves no step). Outside client.transaction, call client.afterCommit with
   * the steps' ids after COMMIT for IMMEDIATE roots to start at once.
   */
  async submitInTx(tx: Tx): Promise<SubmittedWorkflow> {
    const layers = this.#plan();
    const deps = requireDependencies(this.client.store);
    this.#submitted = true;
    const ids = new Map<string, CommandId>();
    const refOf = (d: WorkflowDependencyPlan) => ({
      id: 'step' in d ? ids.get(d.step)! : d.id,
      ...(d.onFailure === undefined ? {} : { onFailure: d.onFailure }),
    });
    // Layer by layer: a step's dependencies have their ids before it is inserted.
    for (const layer of layers) {
      const free = layer.filter((s) => s.dependsOn.length === 0);
      const waiting = layer.filter((s) => s.dependsOn.length > 0);
      const freeIds =
        free.length === 0
          ? []
          : await this.client.store.insert(
              tx,
              free.map((s) => s.command),
            );
      const waitingIds =
        waiting.length === 0
          ? []
          : await deps.insertWaiting(
              tx,
              waiting.map((s) => ({ ...s.command, dependsOn: s.dependsOn.map(refOf) })),
            );
      free.forEach((s, i) => ids.set(s.name, freeIds[i]!));
      waiting.forEach((s, i) => ids.set(s.name, waitingIds[i]!));
    }
    const steps = this.#steps.map((s) => ({ name: s.name, id: ids.get(s.name)! }));
    await deps.recordWorkflow(tx, this.id, steps);
    for (const s of this.#steps) this.client.submitted(tx, ids.get(s.name)!, s.command.type);
    return { id: this.id, steps: Object.fromEntries(steps.map((s) => [s.name, s.id])) };
  }

  #plan(): PlannedStep[][] {
    if (this.#submitted) throw new InvalidArgumentError('this workflow was submitted already');
    return planWorkflow(this.#steps);
  }
}

/** What a step of a workflow waits for: another step (by name), or a command outside it (`step` null). */
export interface WorkflowStepDependency {
  readonly step: string | null;
  readonly id: CommandId;
  readonly onFailure: DependencyFailureRule;
}

/** One step of a workflow as its status resource shows it. */
export interface WorkflowStepStatus {
  readonly name: string;
  readonly id: CommandId;
  readonly type: string;
  readonly status: CommandRecord['status'];
  readonly state: OperationState;
  readonly result: unknown;
  readonly lastError: string | null;
  /** What its executor last reported with `ctx.progress`; null when nothing. */
  readonly progress: CommandProgress | null;
  /** What it waits for, in id order: none for a step that started at once. */
  readonly dependsOn: readonly WorkflowStepDependency[];
}

/** How far a workflow has come, in one figure. */
export interface WorkflowProgress {
  /** Steps finished (SUCCESS, DEAD or CANCELLED). */
  readonly done: number;
  /** Steps. */
  readonly total: number;
  /**
   * 0..1: the finished steps and, of each unfinished one, the share of its work its last
   * `ctx.progress` reported, over all steps (to four places, rounded down); 1 only once every step
   * has finished.
   */
  readonly fraction: number;
}

/** A workflow as a client polling a 202 sees it: every step's state, and the workflow's as one. */
export interface WorkflowStatus {
  readonly id: string;
  /** 'completed' when every step is; 'cancelled' or 'follow_up_failed' when one is and nothing still runs; else 'processing' (or 'accepted' before any step started). */
  readonly state: OperationState;
  readonly steps: readonly WorkflowStepStatus[];
  readonly progress: WorkflowProgress;
}

const FINISHED: ReadonlySet<string> = new Set(['SUCCESS', 'DEAD', 'CANCELLED']);

/** The status resource of workflow `id`; null when there is none. */
export async function workflowStatus<Tx>(
  store: CommandStore<Tx>,
  id: string,
): Promise<WorkflowStatus | null> {
  const deps = requireDependencies(store);
  const recorded = await deps.workflowSteps(id);
  if (recorded.length === 0) return null;
  const [records, edges] = await Promise.all([
    store.getMany(recorded.map((s) => s.id)),
    deps.workflowEdges(id),
  ]);
  const rows = new Map(records.map((r) => [r.id, r]));
  const nameOf = new Map(recorded.map((s) => [s.id, s.name]));
  const dependsOn = new Map<CommandId, WorkflowStepDependency[]>();
  for (const e of edges) {
    const list = dependsOn.get(e.dependant) ?? [];
    list.push({ step: nameOf.get(e.dependency) ?? null, id: e.dependency, onFailure: e.onFailure });
    dependsOn.set(e.dependant, list);
  }
  const steps = recorded.flatMap((s): WorkflowStepStatus[] => {
    const row = rows.get(s.id);
    if (row === undefined) return []; // purged
    return [
      {
        name: s.name,
        id: s.id,
        type: row.type,
        status: row.status,
        state: operationState(row),
        result: row.result,
        lastError: row.lastError,
        progress: row.progress,
        dependsOn: dependsOn.get(s.id) ?? [],
      },
    ];
  });
  const done = steps.filter((s) => FINISHED.has(s.status)).length;
  const unfinished = steps.length - done;
  const state: OperationState =
    unfinished > 0
      ? steps.every((s) => s.state === 'accepted')
        ? 'accepted'
        : 'processing'
      : steps.some((s) => s.status === 'DEAD')
        ? 'follow_up_failed'
        : steps.some((s) => s.status === 'CANCELLED')
          ? 'cancelled'
          : 'completed';
  return { id, state, steps, progress: workflowProgress(steps) };
}

/** The workflow's progress from its steps' (see WorkflowProgress). */
export function workflowProgress(
  steps: readonly Pick<WorkflowStepStatus, 'status' | 'progress'>[],
): WorkflowProgress {
  let done = 0;
  let share = 0;
  for (const s of steps) {
    if (FINISHED.has(s.status)) done += 1;
    else if (s.progress !== null) share += s.progress.done / s.progress.total;
  }
  const total = steps.length;
  if (total === 0 || done === total) return { done, total, fraction: total === 0 ? 0 : 1 };
  // Never 1 while a step is unfinished, whatever the unfinished ones reported.
  const fraction = Math.min(Math.floor(((done + share) / total) * 10_000) / 10_000, 0.9999);
  return { done, total, fraction };
}

/**
 * Cancels what of workflow `id` has not started (its WAITING and PENDING steps; what depends on
 * them follows by its rules). Running steps finish; what waits for them is cancelled here. Returns
 * the ids of the steps that were waiting or pending and are now CANCELLED; none when the workflow
 * does not exist.
 */
export async function cancelWorkflow<Tx>(
  store: CommandStore<Tx>,
  id: string,
  reason = 'the workflow was cancelled',
): Promise<CommandId[]> {
  const steps = await requireDependencies(store).workflowSteps(id);
  const ids = steps.map((s) => s.id);
  const before = await store.getMany(ids);
  const notStarted = before.filter((r) => r.status === 'WAITING' || r.status === 'PENDING').map((r) => r.id);
  // Refused ones started meanwhile, or were cancelled already by the cascade of an earlier one.
  for (const step of notStarted) await store.cancel(step, reason);
  const after = await store.getMany(notStarted);
  return after.filter((r) => r.status === 'CANCELLED').map((r) => r.id);
}
