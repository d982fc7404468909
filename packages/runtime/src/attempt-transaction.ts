import {
  InvalidArgumentError,
  isSqlExecutor,
  TransactionClosedError,
  type CommandId,
  type InsertResult,
} from '@asynccmd/core';
import type { AsyncCommandClient, IdempotentSubmitOptions, SubmitItem } from './client.js';
import type { CommandTypeMap } from './executor.js';
import type { DependentSubmitOptions } from './submit-validation.js';
import type { AttemptWorkflow, SubmittedWorkflow, WorkflowBuilder, WorkflowStepOptions } from './workflow.js';

/** What a transactional attempt needs of the client: its transactions, submits and after-commit work. */
export type ExecutorTransactions = Pick<
  AsyncCommandClient<CommandTypeMap, unknown>,
  'transaction' | 'submit' | 'submitMany' | 'submitIdempotent' | 'afterCommit' | 'workflow'
>;

/**
 * The transaction of one transactional attempt, as its executor sees it: the store's handle behind a
 * guard, and submits in it. Closed once the executor is over (returned, threw or given up on): from
 * then on every use throws TRANSACTION_CLOSED, so a late write can never land outside it.
 */
export class AttemptTransaction {
  #open = true;
  #guarded: unknown = null;
  /** The ids submitted in it to dispatch after its commit (new or replaced commands). */
  readonly dispatched: CommandId[] = [];

  constructor(
    /**
     * The store's own handle (or the SqlExecutor over an ORM's transaction): submits and the
     * runtime's completion run on it, never through the guard.
     */
    readonly tx: unknown,
    private readonly client: ExecutorTransactions,
    private readonly commandId: CommandId,
    /** What the executor gets (guarded) as `ctx.tx`: `tx` itself, or the ORM's transaction object. */
    private readonly exposed: unknown = tx,
  ) {}

  get open(): boolean {
    return this.#open;
  }

  /** The handle the executor gets as `ctx.tx`. */
  handle(): unknown {
    this.#check();
    this.#guarded ??= guardedHandle(this.exposed, () => this.#open, this.commandId);
    return this.#guarded;
  }

  async submit(type: string, payload: unknown, options?: DependentSubmitOptions): Promise<CommandId> {
    this.#check();
    const id = await this.client.submit(this.tx, type, payload, options);
    this.dispatched.push(id);
    return id;
  }

  async submitMany(items: readonly SubmitItem<CommandTypeMap>[]): Promise<CommandId[]> {
    this.#check();
    const ids = await this.client.submitMany(this.tx, items);
    this.dispatched.push(...ids);
    return ids;
  }

  async submitIdempotent(
    type: string,
    bizKey: string,
    payload: unknown,
    options?: IdempotentSubmitOptions,
  ): Promise<InsertResult> {
    this.#check();
    const result = await this.client.submitIdempotent(this.tx, type, bizKey, payload, options);
    if (!result.duplicate || result.replaced) this.dispatched.push(result.id);
    return result;
  }

  /** A workflow whose `submit()` writes it in this transaction (the client's builder, on the store's handle). */
  workflow(id?: string): AttemptWorkflow {
    this.#check();
    return new WorkflowInAttempt(this.client.workflow(id), (builder) => this.#submitWorkflow(builder));
  }

  async #submitWorkflow(builder: WorkflowBuilder): Promise<SubmittedWorkflow> {
    this.#check();
    // A workflow's rows are written on the store's own handle (its waiting steps lock their
    // dependencies there); an ORM's transaction reaches the store only through an SqlExecutor.
    if (isSqlExecutor(this.tx)) {
      throw new InvalidArgumentError(
        "ctx.workflow needs the store's own transaction: declare the executor `transactional: true`, not an ORM bridge's opener",
      );
    }
    const submitted = await builder.submitInTx(this.tx);
    this.dispatched.push(...Object.values(submitted.steps));
    return submitted;
  }

  close(): void {
    this.#open = false;
  }

  #check(): void {
    if (!this.#open) throw new TransactionClosedError(this.commandId);
  }
}

/** The steps go to the client's builder; `submit` to the attempt's transaction. */
class WorkflowInAttempt implements AttemptWorkflow {
  constructor(
    private readonly builder: WorkflowBuilder,
    private readonly submitIn: (builder: WorkflowBuilder) => Promise<SubmittedWorkflow>,
  ) {}

  get id(): string {
    return this.builder.id;
  }

  step(name: string, type: string, payload: unknown, options?: WorkflowStepOptions): this {
    this.builder.step(name, type, payload, options);
    return this;
  }

  submit(): Promise<SubmittedWorkflow> {
    return this.submitIn(this.builder);
  }
}

/**
 * `target` behind a proxy that refuses every property read, write and call once `isOpen()` is
 * false. Methods run on the target itself (a driver's native handle checks its receiver).
 * Calls of a function handle are refused too. Symbols and `then` pass through, so inspecting or awaiting the handle never throws.
 */
function guardedHandle(target: unknown, isOpen: () => boolean, commandId: CommandId): unknown {
  if (target === null || (typeof target !== 'object' && typeof target !== 'function')) return target;
  const refuse = (): never => {
    throw new TransactionClosedError(commandId);
  };
  return new Proxy(target, {
    get(t, prop) {
      if (typeof prop === 'symbol' || prop === 'then') return Reflect.get(t, prop, t) as unknown;
      if (!isOpen()) refuse();
      const value = Reflect.get(t, prop, t) as unknown;
      if (typeof value !== 'function') return value;
      return function guarded(...args: unknown[]): unknown {
        if (!isOpen()) refuse();
        return Reflect.apply(value as (...a: unknown[]) => unknown, t, args);
      };
    },
    set(t, prop, value) {
      if (!isOpen()) refuse();
      return Reflect.set(t, prop, value, t);
    },
    // A handle that is itself a function (a Knex `trx('table')`) is refused the same way.
    apply(t, thisArg, args) {
      if (!isOpen()) refuse();
      return Reflect.apply(t as (...a: unknown[]) => unknown, thisArg, args) as unknown;
    },
  });
}
