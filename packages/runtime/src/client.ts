import type {
  CommandEvent,
  CommandId,
  CommandStore,
  InsertResult,
  OnPending,
  SqlExecutor,
} from '@asynccmd/core';
import { InvalidArgumentError, isSqlExecutor, requireOnPending } from '@asynccmd/core';
import type { CommandEvents } from './command-events.js';
import type { CommandTypeMap } from './executor.js';
import type { ExecutorRegistry } from './executor-registry.js';
import type { ClaimOnCommit } from './immediate-dispatch.js';
import {
  DEPENDENT_SUBMIT_OPTION_NAMES,
  requireSubmitOptions,
  SUBMIT_OPTION_NAMES,
  toDependencyRefs,
  toNewCommand,
  type DependentSubmitOptions,
  type SubmitOptions,
  type SubmitRules,
} from './submit-validation.js';
import {
  coalescedOutcome,
  coalescingKey,
  isLeadingThrottle,
  leadingStep,
  windowInsert,
  type CoalescedSubmit,
  type SubmitWindow,
  type ThrottleWindow,
} from './submit-windows.js';
import { requireDependencies, WorkflowBuilder } from './workflow.js';

type TypeOf<TM> = keyof TM & string;

/** One element of `submitMany`. */
export type SubmitItem<TM extends CommandTypeMap> = {
  [K in TypeOf<TM>]: { readonly type: K; readonly payload: TM[K] } & SubmitOptions;
}[TypeOf<TM>];

/** Options of `submitIdempotent`: a submit's (its bizKey is an argument) and what to do with a PENDING holder. */
export interface IdempotentSubmitOptions extends Omit<SubmitOptions, 'bizKey'> {
  /**
   * When the (type, bizKey) is held by a command that is still PENDING: 'keep' it as it is (the
   * default); 'replace' its payload, headers, priority, maxRetry and due time (runAt, default now)
   * with this submit's, so each submit pushes the run back (a debounce); 'replace-keep-run-at'
   * replaces all but the due time. It keeps its id, owner, ordering key and place, history and
   * retry counters (one waiting for a retry is PENDING too: replaced, its retryCount kept). A
   * RUNNING holder is never changed (`replaced: false`): its executor has read the old payload;
   * submit again once it has finished if the new contents must run.
   */
  readonly onPending?: OnPending;
}

/** Options of `submitCoalesced`: a submit's but bizKey and runAt (the window sets them), and the key. */
export interface CoalescedSubmitOptions extends Omit<SubmitOptions, 'bizKey' | 'runAt'> {
  /** The key commands coalesce under (the type's bizKey); default: the window's key function's. */
  readonly key?: string;
}

/** The `submit` handed to `client.transaction` callbacks: bound to the transaction. */
export type TxSubmit<TM extends CommandTypeMap> = <K extends TypeOf<TM>>(
  type: K,
  payload: TM[K],
  options?: DependentSubmitOptions,
) => Promise<CommandId>;

export interface ClientDeps<Tx> {
  readonly store: CommandStore<Tx>;
  readonly registry: ExecutorRegistry;
  readonly events: CommandEvents;
  readonly rules: SubmitRules;
  /** The `submitWindows` option (checked): the debounce or throttle window of each type that has one. */
  readonly windows?: Readonly<Record<string, SubmitWindow>>;
  /**
   * Before COMMIT of a client.transaction: lets the store claim the first IMMEDIATE command with the
   * commit itself (ImmediateDispatch.claimOnCommit); null when it cannot.
   */
  readonly claimOnCommit: (tx: Tx, immediateIds: readonly CommandId[]) => ClaimOnCommit | null;
  /**
   * After-commit work: dispatch IMMEDIATE commands by id; wake the schedulers (here and, through
   * the store, elsewhere) when other commands were submitted or an IMMEDIATE one was not claimed.
   */
  readonly afterCommit: (work: CommittedWork) => Promise<void>;
}

/** What a commit leaves to do. */
export interface CommittedWork {
  readonly immediateIds: readonly CommandId[];
  /** How many non-IMMEDIATE commands were submitted. */
  readonly others: number;
  /** The store already sent the cross-process wake-up with the commit. */
  readonly announced: boolean;
  /** The claim of one of `immediateIds` that ran with the commit, if any. */
  readonly claimedOnCommit: ClaimOnCommit | null;
  /** The type of each of `immediateIds` this client submitted (not those it no longer remembers). */
  readonly immediateTypes: ReadonlyMap<CommandId, string>;
}

/** What the client learned inside one open `client.transaction`, acted on after commit. */
interface OpenTransaction {
  readonly ids: CommandId[];
  readonly events: CommandEvent[];
  /** The store sends the wake-up for its non-IMMEDIATE commands with the commit. */
  announced: boolean;
  claimedOnCommit: ClaimOnCommit | null;
}

const REMEMBERED_TYPES = 10_000;

/** submitIdempotent's options: a submit's but bizKey (an argument of its own), and onPending. */
const IDEMPOTENT_OPTION_NAMES: readonly string[] = [
  ...SUBMIT_OPTION_NAMES.filter((name) => name !== 'bizKey'),
  'onPending',
];

/** submitCoalesced's options: a submit's but bizKey and runAt, and key. */
const COALESCED_OPTION_NAMES: readonly string[] = [
  ...SUBMIT_OPTION_NAMES.filter((name) => name !== 'bizKey' && name !== 'runAt'),
  'key',
];

/**
 * Submits commands inside the caller's transaction (`tx` is the adapter's transaction handle, or an
 * SqlExecutor over an ORM's transaction where the store accepts one), so they commit or roll back
 * with the business writes. Validates everything before writing.
 */
export class AsyncCommandClient<TM extends CommandTypeMap = CommandTypeMap, Tx = unknown> {
  readonly #open = new Map<Tx, OpenTransaction>();
  /** Transactions of executors that report their commit; a rolled-back one is simply dropped. */
  readonly #openExecutors = new WeakMap<SqlExecutor, OpenTransaction>();
  /** Types of recently submitted ids, so afterCommit claims only IMMEDIATE ones. */
  readonly #typeOf = new Map<CommandId, string>();

  constructor(private readonly deps: ClientDeps<Tx>) {}

  /**
   * Inserts one command in `tx`; returns its id. With `dependsOn`, it waits for those commands
   * (WAITING until they have succeeded; see DependentSubmitOptions).
   */
  async submit<K extends TypeOf<TM>>(
    tx: Tx | SqlExecutor,
    type: K,
    payload: TM[K],
    options?: DependentSubmitOptions,
  ): Promise<CommandId> {
    const { dependsOn, ...submitOptions } = requireSubmitOptions<DependentSubmitOptions>(
      'submit options',
      options,
      DEPENDENT_SUBMIT_OPTION_NAMES,
    );
    const row = toNewCommand(this.deps.rules, type, payload, submitOptions);
    const refs = toDependencyRefs(dependsOn);
    this.#requireExecutorSupport(tx);
    const [id] =
      refs.length === 0
        ? await this.deps.store.insert(tx, [row])
        : // The store refuses an SqlExecutor here (INVALID_ARGUMENT), before anything is written.
          await requireDependencies(this.deps.store).insertWaiting(tx as Tx, [{ ...row, dependsOn: refs }]);
    if (id === undefined) throw new Error('store.insert returned no id');
    this.#submitted(tx, id, type, false);
    return id;
  }

  /**
   * Inserts a command unless an unfinished one with the same (type, bizKey) exists; then returns
   * that one's id with `duplicate: true`. With `onPending` 'replace' or 'replace-keep-run-at', an
   * existing command that is still PENDING takes this submit's contents instead (`replaced: true`;
   * see IdempotentSubmitOptions); a RUNNING one is never changed (`replaced: false`).
   */
  async submitIdempotent<K extends TypeOf<TM>>(
    tx: Tx | SqlExecutor,
    type: K,
    bizKey: string,
    payload: TM[K],
    options?: IdempotentSubmitOptions,
  ): Promise<InsertResult> {
    if (typeof bizKey !== 'string' || bizKey.length === 0) {
      throw new InvalidArgumentError('submitIdempotent needs a non-empty bizKey');
    }
    const { onPending, ...submitOptions } = requireSubmitOptions<IdempotentSubmitOptions>(
      'submitIdempotent options',
      options,
      IDEMPOTENT_OPTION_NAMES,
    );
    const choice = requireOnPending(onPending);
    const row = toNewCommand(this.deps.rules, type, payload, { ...submitOptions, bizKey });
    this.#requireExecutorSupport(tx);
    const result = await this.deps.store.insertIdempotent(
      tx,
      { ...row, bizKey },
      choice === 'keep' ? undefined : { onPending: choice },
    );
    // A replaced command may be due sooner than it was: dispatched and announced as a new one is.
    this.#submitted(tx, result.id, type, result.duplicate, result.replaced);
    return result;
  }

  /**
   * Submits under the type's `submitWindows` window (debounce or throttle), coalescing with the
   * key's unfinished command: see CoalescedOutcome. The key is the type's bizKey, so a
   * submitIdempotent of the same key coalesces with it too. Atomic under concurrent submits, in `tx`.
   */
  async submitCoalesced<K extends TypeOf<TM>>(
    tx: Tx | SqlExecutor,
    type: K,
    payload: TM[K],
    options?: CoalescedSubmitOptions,
  ): Promise<CoalescedSubmit> {
    const window = this.deps.windows?.[type];
    if (window === undefined) {
      throw new InvalidArgumentError(
        `submitCoalesced of "${type}": the type has no window in the \`submitWindows\` option`,
      );
    }
    const { key: given, ...submitOptions } = requireSubmitOptions<CoalescedSubmitOptions>(
      'submitCoalesced options',
      options,
      COALESCED_OPTION_NAMES,
    );
    const bizKey = coalescingKey(window, given, payload, type);
    if (isLeadingThrottle(window)) {
      return this.#submitLeading(tx, type, payload, submitOptions, window, bizKey);
    }
    const { onPending, runAt } = windowInsert(window, this.deps.rules.clock.now());
    const row = toNewCommand(this.deps.rules, type, payload, { ...submitOptions, bizKey, runAt });
    this.#requireExecutorSupport(tx);
    const result = await this.deps.store.insertIdempotent(
      tx,
      { ...row, bizKey },
      onPending === 'keep' ? undefined : { onPending },
    );
    this.#submitted(tx, result.id, type, result.duplicate, result.replaced);
    return { ...result, outcome: coalescedOutcome(window, result) };
  }

  /**
   * submitCoalesced under a leading-edge throttle: the key's window read and locked in `tx`, then
   * a command due now (a window opens), nothing (a dropping throttle's window is taken), or a
   * command due when the window ends, which opens the next one (see leadingStep).
   */
  async #submitLeading(
    tx: Tx | SqlExecutor,
    type: string,
    payload: unknown,
    options: SubmitOptions,
    window: ThrottleWindow,
    bizKey: string,
  ): Promise<CoalescedSubmit> {
    const now = this.deps.rules.clock.now();
    // Checked before the window is touched: a bad submit writes nothing.
    const row = toNewCommand(this.deps.rules, type, payload, { ...options, bizKey, runAt: now });
    this.#requireExecutorSupport(tx);
    const windows = this.deps.store.submitWindows;
    const held = await windows.hold(tx, type, bizKey);
    const { step, runAt } = leadingStep(window, held?.opensAt ?? null, now);
    if (step === 'drop' && held !== null) {
      return { id: held.holder, duplicate: true, replaced: false, outcome: 'throttled' };
    }
    const result = await this.deps.store.insertIdempotent(
      tx,
      { ...row, bizKey, runAt },
      window.later === 'merge' ? { onPending: 'replace-keep-run-at' } : undefined,
    );
    if (!result.duplicate) {
      await windows.set(tx, type, bizKey, {
        opensAt: new Date(runAt.getTime() + window.throttleMs),
        holder: result.id,
      });
    }
    this.#submitted(tx, result.id, type, result.duplicate, result.replaced);
    return { ...result, outcome: coalescedOutcome(window, result) };
  }

  /** Inserts a batch in one statement where the database allows; all are validated first. */
  async submitMany(tx: Tx | SqlExecutor, items: readonly SubmitItem<TM>[]): Promise<CommandId[]> {
    if (!Array.isArray(items)) {
      throw new InvalidArgumentError('submitMany takes an array of { type, payload, ...options }');
    }
    const rows = items.map((item: unknown, i) => {
      if (typeof item !== 'object' || item === null) {
        throw new InvalidArgumentError(
          `submitMany item ${i} must be an object { type, payload, ...options }`,
        );
      }
      const { type, payload, ...options } = item as SubmitItem<TM>;
      return toNewCommand(
        this.deps.rules,
        type,
        payload,
        options,
        SUBMIT_OPTION_NAMES,
        `submitMany item ${i}`,
      );
    });
    if (rows.length === 0) return [];
    this.#requireExecutorSupport(tx);
    const ids = await this.deps.store.insert(tx, rows);
    ids.forEach((id, i) => this.#submitted(tx, id, rows[i]?.type ?? '', false));
    return ids;
  }

  /**
   * Runs `fn` in a store transaction, commits, then does the after-commit work (IMMEDIATE dispatch,
   * wake-ups). Rolls back and rethrows if `fn` throws: then nothing was submitted.
   */
  async transaction<T>(fn: (tx: Tx, submit: TxSubmit<TM>) => Promise<T>): Promise<T> {
    let open: OpenTransaction | null = null;
    let nested = false;
    const result = await this.deps.store.transaction(async (tx) => {
      const outer = this.#open.get(tx);
      // Nested in another client.transaction on the same handle: its commit does the after-commit work.
      nested = outer !== undefined;
      const current: OpenTransaction = outer ?? {
        ids: [],
        events: [],
        announced: false,
        claimedOnCommit: null,
      };
      open = current;
      if (!nested) this.#open.set(tx, current);
      try {
        const value = await fn(tx, (type, payload, options) => this.submit(tx, type, payload, options));
        if (!nested) {
          // Where the store can, the wake-up for the poll loops and the first IMMEDIATE claim
          // go out with the COMMIT itself, a round trip sooner than after it.
          const immediate = current.ids.filter((id) => this.#isImmediate(id));
          if (immediate.length < current.ids.length) {
            current.announced = this.deps.store.capabilities.commitRiding?.notify(tx) ?? false;
          }
          current.claimedOnCommit = this.deps.claimOnCommit(tx, immediate);
        }
        return value;
      } finally {
        if (!nested) this.#open.delete(tx);
      }
    });
    const committed = open as OpenTransaction | null;
    if (nested || committed === null) return result;
    for (const event of committed.events) this.deps.events.emit(event);
    await this.#afterCommit(committed.ids, committed.announced, committed.claimedOnCommit);
    return result;
  }

  /**
   * For callers who manage their own transactions: call after COMMIT with the ids submitted in it.
   * Wakes the schedulers and dispatches the IMMEDIATE ones. Never rejects on store trouble (the
   * poll loop picks up whatever was not dispatched).
   */
  afterCommit(ids: readonly CommandId[]): Promise<void> {
    return this.#afterCommit(ids, false, null);
  }

  async #afterCommit(
    ids: readonly CommandId[],
    announced: boolean,
    claimedOnCommit: ClaimOnCommit | null,
  ): Promise<void> {
    if (ids.length === 0) return;
    const immediateIds = ids.filter((id) => this.#isImmediate(id));
    const immediateTypes = new Map<CommandId, string>();
    for (const id of immediateIds) {
      const type = this.#typeOf.get(id);
      if (type !== undefined) immediateTypes.set(id, type);
    }
    for (const id of ids) this.#typeOf.delete(id);
    await this.deps.afterCommit({
      immediateIds,
      others: ids.length - immediateIds.length,
      announced,
      claimedOnCommit,
      immediateTypes,
    });
  }

  /** An id of an IMMEDIATE type, or of a type no longer remembered (a claim by id settles it). */
  #isImmediate(id: CommandId): boolean {
    const type = this.#typeOf.get(id);
    return type === undefined || this.deps.registry.get(type)?.mode === 'IMMEDIATE';
  }

  /**
   * A workflow: steps that wait for each other, submitted together with `submit()` or, in the
   * caller's transaction, `submitInTx(tx)` (docs/workflows.md). `id` names it (default: a UUID).
   */
  workflow(id?: string): WorkflowBuilder<TM, Tx> {
    return new WorkflowBuilder<TM, Tx>(
      {
        store: this.deps.store,
        rules: this.deps.rules,
        transaction: (fn) => this.transaction((tx) => fn(tx)),
        submitted: (tx, id, type) => this.#submitted(tx, id, type, false),
      },
      id,
    );
  }

  /** Alias of afterCommit, by what it does. */
  dispatchImmediate(ids: readonly CommandId[]): Promise<void> {
    return this.afterCommit(ids);
  }

  #requireExecutorSupport(tx: Tx | SqlExecutor): void {
    if (isSqlExecutor(tx) && this.deps.store.capabilities.sqlExecutor !== true) {
      throw new InvalidArgumentError(
        `the ${this.deps.store.dialect} store cannot submit through an SqlExecutor; pass its own transaction handle`,
      );
    }
  }

  /** The open transaction of an executor that reports its commit, its after-commit work registered once. */
  #executorTransaction(executor: SqlExecutor): OpenTransaction | undefined {
    if (typeof executor.onCommit !== 'function') return undefined;
    let open = this.#openExecutors.get(executor);
    if (open === undefined) {
      const current: OpenTransaction = { ids: [], events: [], announced: false, claimedOnCommit: null };
      open = current;
      this.#openExecutors.set(executor, current);
      executor.onCommit(() => {
        this.#openExecutors.delete(executor);
        for (const event of current.events) this.deps.events.emit(event);
        void this.#afterCommit(current.ids, false, null);
      });
    }
    return open;
  }

  #submitted(tx: Tx | SqlExecutor, id: CommandId, type: string, duplicate: boolean, replaced = false): void {
    const dispatch = !duplicate || replaced;
    if (dispatch) {
      this.#typeOf.set(id, type);
      if (this.#typeOf.size > REMEMBERED_TYPES) {
        const oldest = this.#typeOf.keys().next();
        if (!oldest.done) this.#typeOf.delete(oldest.value);
      }
    }
    const event: CommandEvent = { kind: 'submitted', id, type, duplicate };
    const open = isSqlExecutor(tx) ? this.#executorTransaction(tx) : this.#open.get(tx);
    if (!open) return this.deps.events.emit(event);
    // Inside client.transaction (or an executor's that reports its commit): report and dispatch only once it has committed.
    if (dispatch) open.ids.push(id);
    open.events.push(event);
  }
}
