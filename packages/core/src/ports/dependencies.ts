import { LIMITS } from '../limits.js';
import type { CommandId, NewCommand } from '../command.js';
import type { CommandStatus } from '../status.js';

/**
 * What a dependant does when a command it depends on ends DEAD or CANCELLED: 'cancel' (the
 * default) cancels it, and its own dependants by their rules; 'continue' counts that end as
 * finished, so the dependant runs once its other dependencies allow (a batch's callback).
 */
export type DependencyFailureRule = 'cancel' | 'continue';

export const DEPENDENCY_FAILURE_RULES: readonly DependencyFailureRule[] = ['cancel', 'continue'];

/** One command a dependant waits for. */
export interface DependencyRef {
  readonly id: CommandId;
  /** Default 'cancel'. */
  readonly onFailure?: DependencyFailureRule;
}

/** A command submitted to wait for others: WAITING until they have finished, then PENDING. */
export interface WaitingCommand extends NewCommand {
  /** 1..MAX_DEPENDENCIES distinct commands that exist (in this transaction or committed). */
  readonly dependsOn: readonly DependencyRef[];
}

/** The most dependencies one command may wait for (a batch's callback waits for every member). */
export const MAX_DEPENDENCIES = LIMITS.dependencies;

/** One dependency of a command, as it now stands. */
export interface DependencyOutcome {
  readonly id: CommandId;
  readonly type: string;
  readonly status: CommandStatus;
  readonly onFailure: DependencyFailureRule;
  /** What its executor left with `ctx.setResult` when it succeeded; else null. */
  readonly result: unknown;
}

/** A workflow's step as stored: its name in the workflow and its command. */
export interface WorkflowStepRecord {
  readonly name: string;
  readonly id: CommandId;
}

/** Where a command stands in a workflow: the workflow's id and the step's name. */
export interface WorkflowMembership {
  readonly workflowId: string;
  readonly step: string;
}

/** One edge of a workflow's graph: `dependant`, a step of it, waits for `dependency` (a step, or a command outside). */
export interface WorkflowEdge {
  readonly dependency: CommandId;
  readonly dependant: CommandId;
  readonly onFailure: DependencyFailureRule;
}

/**
 * Commands that wait for other commands (`<table>_dependencies`), and workflows as named groups of
 * them (`<table>_workflow_steps`); see docs/workflows.md. The release of a dependant is written by
 * the store in the same transaction as its dependency's terminal transition (complete, fail to
 * DEAD, reclaim to DEAD, kill, cancel, the completion of a transactional executor), so it happens
 * exactly once, whoever finishes the last dependency and however many do so at once.
 */
export interface DependencyStore<Tx = unknown> {
  /**
   * Inserts commands in the caller's transaction, each WAITING for its `dependsOn`, and returns
   * their ids in order. A command whose dependencies have all finished already is PENDING at once
   * (or CANCELLED at once, by its rule, when one ended DEAD or CANCELLED). The dependencies' rows
   * are locked until the caller's transaction ends. A dependency that does not exist is
   * NOT_FOUND; bad input (no dependency, too many, a duplicate, a bad rule) is INVALID_ARGUMENT;
   * both before anything is written.
   */
  insertWaiting(tx: Tx, commands: readonly WaitingCommand[]): Promise<CommandId[]>;
  /** The dependencies of `id`, by id; none when it has none (or does not exist). */
  dependenciesOf(id: CommandId): Promise<DependencyOutcome[]>;
  /**
   * Records `steps` as the workflow `workflowId`, in the caller's transaction (with its commands).
   * A workflow id that exists already is refused (INVALID_ARGUMENT) before anything is written.
   */
  recordWorkflow(tx: Tx, workflowId: string, steps: readonly WorkflowStepRecord[]): Promise<void>;
  /** The steps of a workflow, in the order they were recorded; none when it does not exist. */
  workflowSteps(workflowId: string): Promise<WorkflowStepRecord[]>;
  /**
   * The workflow command `id` is a step of, and the step's name; null when it is none's (read
   * from an index on the step's command: it costs the same however many workflows there are).
   */
  workflowOf(id: CommandId): Promise<WorkflowMembership | null>;
  /**
   * The dependencies of every step of workflow `workflowId`, ordered by dependant, then
   * dependency (as ids); none when it does not exist or none of its steps waits for anything.
   */
  workflowEdges(workflowId: string): Promise<WorkflowEdge[]>;
}
