import type { CommandId, NewCommand } from '../command.js';
import { CommandNotFoundError, InvalidArgumentError } from '../errors.js';
import { requireId } from '../input-checks.js';
import { DEPENDENCY_FAILURE_RULES, MAX_DEPENDENCIES } from '../ports/dependencies.js';
import type {
  DependencyFailureRule,
  DependencyOutcome,
  DependencyStore,
  WaitingCommand,
  WorkflowEdge,
  WorkflowMembership,
  WorkflowStepRecord,
} from '../ports/dependencies.js';
import { isSqlExecutor } from '../ports/sql-executor.js';
import { isCommandStatus } from '../status.js';
import type { CommandStatus } from '../status.js';
import { requireWorkflowName } from '../workflow.js';

/*
 * The adapter kit's part of dependencies (core ports/dependencies.ts): the checks of a waiting
 * submit, and the submit itself over four dialect callbacks. Each edge of `<table>_dependencies`
 * is OPEN, SATISFIED or BLOCKED; a dependant counts its unsatisfied edges (`waiting_for`) and,
 * among them, the blocked ones (`blocked_by`). Its dependency's terminal transition, in the same
 * transaction, settles the edges and moves the dependant (see docs/workflows.md):
 *   SUCCESS                          OPEN | BLOCKED → SATISFIED
 *   DEAD | CANCELLED                 OPEN → SATISFIED (rule 'continue') or BLOCKED (rule 'cancel')
 *   revived (cancelled by its own dependency, now free again)   BLOCKED → OPEN
 * and then a WAITING dependant with blocked_by > 0 → CANCELLED (by dependency), one with
 * waiting_for = 0 → PENDING, and one CANCELLED by dependency whose blocked_by is back to 0 →
 * WAITING (or PENDING): an admin retry of a DEAD step that then succeeds resumes what it cancelled.
 */

export const EDGE_OPEN = 0;
export const EDGE_SATISFIED = 1;
export const EDGE_BLOCKED = 2;
export type EdgeState = typeof EDGE_OPEN | typeof EDGE_SATISFIED | typeof EDGE_BLOCKED;

/** The last error of a command cancelled because a dependency of its ended DEAD or CANCELLED. */
export const DEPENDENCY_CANCELLED_ERROR = 'cancelled: a command it depends on ended DEAD or CANCELLED';

/** A waiting command, checked: its dependencies distinct, with their rules. */
export interface CheckedWaitingCommand {
  readonly command: NewCommand;
  readonly dependsOn: readonly { readonly id: CommandId; readonly onFailure: DependencyFailureRule }[];
}

/** Checks `insertWaiting`'s commands' dependencies (the commands themselves: the store's insert). */
export function checkWaitingCommands(commands: readonly WaitingCommand[]): CheckedWaitingCommand[] {
  if (!Array.isArray(commands)) throw new InvalidArgumentError('commands must be an array');
  return commands.map((c) => {
    const deps: unknown = (c as { dependsOn?: unknown } | null)?.dependsOn;
    if (!Array.isArray(deps) || deps.length === 0 || deps.length > MAX_DEPENDENCIES) {
      throw new InvalidArgumentError(`dependsOn must list 1..${MAX_DEPENDENCIES} commands`);
    }
    const seen = new Set<CommandId>();
    const dependsOn = deps.map((d: unknown) => {
      const ref = (d ?? {}) as { id?: unknown; onFailure?: unknown };
      const id = requireId(ref.id);
      const onFailure = ref.onFailure ?? 'cancel';
      if (!(DEPENDENCY_FAILURE_RULES as readonly unknown[]).includes(onFailure)) {
        throw new InvalidArgumentError(`onFailure must be one of ${DEPENDENCY_FAILURE_RULES.join(', ')}`);
      }
      if (seen.has(id)) throw new InvalidArgumentError(`dependsOn names command ${id} twice`);
      seen.add(id);
      return { id, onFailure: onFailure as DependencyFailureRule };
    });
    const { dependsOn: _omitted, ...command } = c;
    return { command, dependsOn };
  });
}

/** An edge to insert. */
export interface NewEdge {
  readonly dependency: CommandId;
  readonly dependant: CommandId;
  readonly onFailure: DependencyFailureRule;
  readonly state: EdgeState;
}

/** How a freshly inserted dependant starts: its counters and status (PENDING needs no write). */
export interface DependantHold {
  readonly id: CommandId;
  readonly status: 'WAITING' | 'CANCELLED';
  readonly waitingFor: number;
  readonly blockedBy: number;
}

/**
 * What an adapter implements of dependencies, given checked input (checkedDependencies checks
 * it): the parts of a waiting submit, each on the caller's transaction, and the reads.
 */
export interface DependencyEngine<Tx> {
  /** Locks the rows of `ids` (distinct, in id order) until `tx` ends; the status of each that exists. */
  lock(tx: Tx, ids: readonly CommandId[]): Promise<ReadonlyMap<CommandId, CommandStatus>>;
  /** Marks these (locked) rows as having dependants: their terminal transitions settle them. */
  mark(tx: Tx, ids: readonly CommandId[]): Promise<void>;
  insertEdges(tx: Tx, edges: readonly NewEdge[]): Promise<void>;
  /** Writes the counters and status of dependants that do not start PENDING. */
  hold(tx: Tx, holds: readonly DependantHold[]): Promise<void>;
  /** Rows of the dependencies of `id` (dependencyOutcomes shapes them). */
  dependenciesOf(id: CommandId): Promise<DependencyOutcome[]>;
  /** `workflowId` and the steps checked; refuses (INVALID_ARGUMENT) a workflow id that exists. */
  recordWorkflow(tx: Tx, workflowId: string, steps: readonly WorkflowStepRecord[]): Promise<void>;
  /** `workflowId` checked. */
  workflowSteps(workflowId: string): Promise<WorkflowStepRecord[]>;
  /** `id` checked; an engine reads it with an index on the step's command. */
  workflowOf(id: CommandId): Promise<WorkflowMembership | null>;
  /** `workflowId` checked; rows of workflowEdgeRows' shape (it orders them). */
  workflowEdges(workflowId: string): Promise<WorkflowEdge[]>;
}

/**
 * The DependencyStore over an engine: every call's input checked, then delegated; the waiting
 * submit's commands go through `insert` (the store's own, which checks them and the transaction).
 */
export function checkedDependencies<Tx>(
  engine: DependencyEngine<Tx>,
  insert: (tx: Tx, commands: readonly NewCommand[]) => Promise<CommandId[]>,
): DependencyStore<Tx> {
  const ownHandle = (tx: Tx, what: string): Tx => {
    if (typeof tx !== 'object' || tx === null || isSqlExecutor(tx)) {
      throw new InvalidArgumentError(`${what} takes the store's own transaction handle`);
    }
    return tx;
  };
  return {
    insertWaiting: (tx, commands) =>
      insertWaitingCommands(ownHandle(tx, 'a waiting submit'), commands, { ...engine, insert }),
    dependenciesOf: async (id) => engine.dependenciesOf(requireId(id)),
    recordWorkflow: async (tx, workflowId, steps) => {
      const checked = checkWorkflowRecord(workflowId, steps);
      return engine.recordWorkflow(ownHandle(tx, 'a workflow'), checked.workflowId, checked.steps);
    },
    workflowSteps: async (workflowId) =>
      engine.workflowSteps(requireWorkflowName('a workflow id', workflowId)),
    workflowOf: async (id) => engine.workflowOf(requireId(id)),
    workflowEdges: async (workflowId) =>
      engine.workflowEdges(requireWorkflowName('a workflow id', workflowId)),
  };
}

/** What insertWaitingCommands runs on: the engine's parts and the store's insert. */
type WaitingInsert<Tx> = Pick<DependencyEngine<Tx>, 'lock' | 'mark' | 'insertEdges' | 'hold'> & {
  insert(tx: Tx, commands: readonly NewCommand[]): Promise<CommandId[]>;
};

/** The edge a dependency in `status` starts with. */
function initialEdgeState(status: CommandStatus, onFailure: DependencyFailureRule): EdgeState {
  if (status === 'SUCCESS') return EDGE_SATISFIED;
  if (status === 'DEAD' || status === 'CANCELLED')
    return onFailure === 'continue' ? EDGE_SATISFIED : EDGE_BLOCKED;
  return EDGE_OPEN;
}

/**
 * insertWaiting over an engine: checks, locks the dependencies (NOT_FOUND for one that does not
 * exist, before any write), inserts the commands PENDING, then their edges, then holds those that
 * must wait (the rows are the caller's transaction's until it commits: no claim sees them PENDING).
 */
export async function insertWaitingCommands<Tx>(
  tx: Tx,
  commands: readonly WaitingCommand[],
  engine: WaitingInsert<Tx>,
): Promise<CommandId[]> {
  const checked = checkWaitingCommands(commands);
  // The store's insert of nothing checks the transaction handle alone, before anything runs on it.
  await engine.insert(tx, []);
  if (checked.length === 0) return [];
  const wanted = [...new Set(checked.flatMap((c) => c.dependsOn.map((d) => d.id)))].sort(compareIdText);
  const statuses = await engine.lock(tx, wanted);
  const missing = wanted.find((id) => !statuses.has(id));
  if (missing !== undefined) throw new CommandNotFoundError(missing);
  const ids = await engine.insert(
    tx,
    checked.map((c) => c.command),
  );
  await engine.mark(tx, wanted);
  const edges: NewEdge[] = [];
  const holds: DependantHold[] = [];
  checked.forEach((c, i) => {
    const dependant = ids[i]!;
    let waitingFor = 0;
    let blockedBy = 0;
    for (const d of c.dependsOn) {
      const state = initialEdgeState(statuses.get(d.id)!, d.onFailure);
      if (state !== EDGE_SATISFIED) waitingFor += 1;
      if (state === EDGE_BLOCKED) blockedBy += 1;
      edges.push({ dependency: d.id, dependant, onFailure: d.onFailure, state });
    }
    if (waitingFor > 0) {
      holds.push({ id: dependant, status: blockedBy > 0 ? 'CANCELLED' : 'WAITING', waitingFor, blockedBy });
    }
  });
  await engine.insertEdges(tx, edges);
  if (holds.length > 0) await engine.hold(tx, holds);
  return ids;
}

/** Id order of decimal id texts: lock in one order, so two submitters never wait crosswise. */
function compareIdText(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** A row of a dependenciesOf query, as the adapters read it. */
export interface DependencyRow {
  readonly id: string | number | bigint;
  readonly type: string;
  readonly status: string;
  readonly on_failure: string;
  /** JSON text, or what the driver parsed it into; null when none. */
  readonly result: unknown;
}

/** dependenciesOf's answer from its rows (`parse` reads a result as the adapter stores it). */
export function dependencyOutcomes(
  rows: readonly DependencyRow[],
  parse: (result: unknown) => unknown,
): DependencyOutcome[] {
  return rows
    .map((r) => {
      if (!isCommandStatus(r.status)) throw new Error(`unknown status ${r.status}`);
      return {
        id: String(r.id),
        type: r.type,
        status: r.status,
        onFailure: r.on_failure === 'continue' ? ('continue' as const) : ('cancel' as const),
        result: r.result === null || r.result === undefined ? null : parse(r.result),
      };
    })
    .sort((a, b) => compareIdText(a.id, b.id));
}

/** Checks recordWorkflow's input. */
export function checkWorkflowRecord(
  workflowId: unknown,
  steps: readonly WorkflowStepRecord[],
): { workflowId: string; steps: WorkflowStepRecord[] } {
  const id = requireWorkflowName('a workflow id', workflowId);
  if (!Array.isArray(steps) || steps.length === 0) throw new InvalidArgumentError('a workflow needs steps');
  const names = new Set<string>();
  const checked = steps.map((s) => {
    const name = requireWorkflowName('a step name', s.name);
    if (names.has(name)) throw new InvalidArgumentError(`step "${name}" is recorded twice`);
    names.add(name);
    return { name, id: requireId(s.id) };
  });
  return { workflowId: id, steps: checked };
}

/** A row of a workflowEdges query, as the adapters read it. */
export interface WorkflowEdgeRow {
  readonly dependency_id: string | number | bigint;
  readonly dependant_id: string | number | bigint;
  readonly on_failure: string;
}

/** workflowEdges' answer from its rows: ordered by dependant, then dependency. */
export function workflowEdgesFromRows(rows: readonly WorkflowEdgeRow[]): WorkflowEdge[] {
  return rows
    .map((r) => ({
      dependency: String(r.dependency_id),
      dependant: String(r.dependant_id),
      onFailure: r.on_failure === 'continue' ? ('continue' as const) : ('cancel' as const),
    }))
    .sort((a, b) => compareIdText(a.dependant, b.dependant) || compareIdText(a.dependency, b.dependency));
}
