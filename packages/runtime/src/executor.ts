import type { RecurringTick } from './recurring/tick.js';
import type {
  DependencyOutcome,
  BackoffPolicy,
  ClaimedCommand,
  CommandId,
  CommandProgress,
  ExecutionMode,
  InsertResult,
  Logger,
  TransactionOpener,
} from '@asynccmd/core';
import type { IdempotentSubmitOptions, SubmitItem } from './client.js';
import type { DependentSubmitOptions } from './submit-validation.js';
import type { AttemptWorkflow } from './workflow.js';

/** What an executor sees besides its payload. */
export interface ExecutionContext<P = unknown> {
  readonly id: CommandId;
  /** The claimed row (payload already parsed). */
  readonly command: ClaimedCommand<P>;
  /** 1 for the first attempt, 2 for the first retry, … */
  readonly attempt: number;
  /**
   * Aborted when the per-type timeout passes, when the claim is taken away (lease lost, admin
   * requeue or kill) or when shutdown gives up waiting. Pass it to fetch, database drivers, timers.
   */
  readonly signal: AbortSignal;
  readonly logger: Logger;
  /** For the command of a recurring schedule: which schedule, and the tick it speaks for; else null. */
  readonly tick: RecurringTick | null;
  /**
   * Leaves `result` as what this attempt produced: written with its SUCCESS (in the same statement)
   * and read back as the command's `result` — by the status resource, for one. Called again, the
   * last call wins; an attempt that fails keeps none. Throws RESULT_NOT_SERIALISABLE (by the
   * payload's rules) or RESULT_TOO_LARGE (over `maxResultBytes`), which fails the attempt unless
   * caught.
   */
  setResult(result: unknown): void;
  /**
   * The commands this one waits for (a workflow step's dependencies, a batch callback's members),
   * as they stand now: each one's status and, for one that succeeded, its result. Read from the
   * store when called; none for a command submitted without dependencies.
   */
  dependencies(): Promise<readonly DependencyOutcome[]>;
  /**
   * Reports how far this attempt has come: `done` of `total` (whole numbers, 0 ≤ done ≤ total,
   * total ≥ 1), read back as the command's `progress` by the status resources, the admin API, the
   * dashboard and `asynccmd show`. Call it as often as you like: the writes are throttled (the
   * first at once, then at most one a second per command, the latest report winning; the last is
   * written before the outcome) and fenced by the claim, so a stale attempt's progress is never
   * stored. Throws INVALID_ARGUMENT for anything else, which fails the attempt unless caught.
   */
  progress(progress: CommandProgress): void;
}

/**
 * What a transactional executor sees besides its payload: the attempt's transaction, and submits
 * in it. What it writes there, the commands it submits there and the command's SUCCESS commit
 * together, or not at all (see TransactionalExecutor).
 */
export interface TransactionalContext<
  P = unknown,
  Tx = unknown,
  TM extends CommandTypeMap = CommandTypeMap,
> extends ExecutionContext<P> {
  /**
   * The store's transaction handle (a pg PoolClient, a mysql2 Connection, the better-sqlite3
   * Database), or the ORM's transaction object when the executor declares an ORM bridge's opener
   * (a Knex `trx`, …), for the executor's own writes. Once the attempt is over (the executor returned,
   * threw or was given up on), reading it or calling anything on it throws TRANSACTION_CLOSED.
   */
  readonly tx: Tx;
  /** `client.submit` in the attempt's transaction: the command exists only if the attempt succeeds. */
  submit<K extends keyof TM & string>(
    type: K,
    payload: TM[K],
    options?: DependentSubmitOptions,
  ): Promise<CommandId>;
  /** `client.submitMany` in the attempt's transaction. */
  submitMany(items: readonly SubmitItem<TM>[]): Promise<CommandId[]>;
  /** `client.submitIdempotent` in the attempt's transaction. */
  submitIdempotent<K extends keyof TM & string>(
    type: K,
    bizKey: string,
    payload: TM[K],
    options?: IdempotentSubmitOptions,
  ): Promise<InsertResult>;
  /**
   * A workflow (docs/workflows.md) whose `submit()` writes it in the attempt's transaction: its
   * steps exist if and only if the attempt succeeds. On the store's own handle only
   * (`transactional: true`); in an ORM bridge's transaction its submit is INVALID_ARGUMENT.
   */
  workflow(id?: string): AttemptWorkflow<TM>;
}

/**
 * Runs one command type. A plain object or an (inversify `@injectable()`) class instance.
 * Delivery is at-least-once: `execute` must be idempotent (or the executor transactional, for
 * writes to the store's own database: see TransactionalExecutor).
 */
export interface CommandExecutor<T extends string = string, P = unknown> {
  readonly type: T;
  /** Not transactional (the default): see TransactionalExecutor. */
  readonly transactional?: false;
  /** Default 'SCHEDULED': inline in the poll loop. */
  readonly mode?: ExecutionMode;
  /**
   * Name of an isolated pool (declared in the runtime's `pools` option); default: the shared pool.
   * Only with mode ASYNC_POOL or IMMEDIATE: `defineExecutor` types it so, the runtime refuses it otherwise.
   */
  readonly pool?: string;
  /** Retries after the first attempt for commands submitted without their own `maxRetry`. */
  readonly maxRetry?: number;
  /** Default: the runtime's backoff (core exponentialBackoff: min(60 s·2ⁿ, 1 h)). */
  readonly backoff?: BackoffPolicy;
  /** Per-attempt time limit, delivered as `context.signal`; the attempt fails when it passes. */
  readonly timeoutMs?: number;
  /**
   * Lease for this type (default: the runtime's `leaseMs`). Raise it for work that blocks the event
   * loop for long stretches, so heartbeats that cannot run are not mistaken for a dead process.
   */
  readonly leaseMs?: number;
  execute(payload: P, context: ExecutionContext<P>): Promise<void> | void;
}

/**
 * An executor that runs inside a transaction of the store's database, opened for each attempt:
 * its writes through `ctx.tx`, the commands it submits through `ctx.submit` and the command's
 * SUCCESS (fenced by the claim) commit together. An attempt whose claim was taken away meanwhile
 * commits nothing (its transaction is rolled back); one that throws or times out is rolled back
 * and retried as any other. Exactly once for the writes in that database; anything it does
 * elsewhere (an HTTP call) is still at least once. It holds one connection and one open
 * transaction for its whole run; on SQLite (one writer) such attempts run one at a time.
 */
export interface TransactionalExecutor<
  T extends string = string,
  P = unknown,
  Tx = unknown,
  TM extends CommandTypeMap = CommandTypeMap,
> extends Omit<CommandExecutor<T, P>, 'transactional' | 'execute'> {
  /**
   * `true`: the attempt runs in a transaction of the store's driver, `ctx.tx` its handle. An ORM
   * bridge's opener (`knexTransactions(knex)`, …): it runs in that ORM's own transaction on the
   * store's database, `ctx.tx` the ORM's transaction object, and the SUCCESS is written through it.
   */
  readonly transactional: true | TransactionOpener<Tx>;
  execute(payload: P, context: TransactionalContext<P, Tx, TM>): Promise<void> | void;
}

/** An executor whose payload type is erased: what registries and options hold. */
// The payload parameter is contravariant, so `never` is what every executor is assignable to.
// The opener hands its transaction out (covariant), so it is erased to `unknown` there.
export type AnyExecutor =
  | CommandExecutor<string, never>
  | (Omit<TransactionalExecutor<string, never, never>, 'transactional'> & {
      readonly transactional: true | TransactionOpener<unknown>;
    });

/**
 * Whether a payload type holds a Date, down to a few levels (deeper is not looked at): a submit
 * refuses one (PAYLOAD_NOT_SERIALISABLE), since JSON would hand the executor a string.
 */
type HoldsDate<P, Depth extends unknown[] = []> = 0 extends 1 & P
  ? false // any: nothing to say
  : Depth['length'] extends 6
    ? false
    : P extends Date
      ? true
      : P extends readonly (infer Item)[]
        ? HoldsDate<Item, [...Depth, 0]>
        : P extends object
          ? true extends { [K in keyof P]-?: HoldsDate<P[K], [...Depth, 0]> }[keyof P]
            ? true
            : false
          : false;

/** Nothing for a payload type a submit can carry; for one holding a Date, a property no executor has. */
export type PayloadTypeRules<P> = [HoldsDate<P>] extends [false]
  ? unknown
  : { readonly 'a payload holds no Date: send toISOString() and type the field as a string': never };

/**
 * A plain-object executor as `defineExecutor` takes it: a `pool` only beside a mode that runs in one
 * (ASYNC_POOL, or IMMEDIATE, whose start at commit goes to its pool), since the runtime refuses a
 * SCHEDULED executor with a pool (it runs inline in the poll loop).
 */
export type ExecutorDefinition<T extends string = string, P = unknown> =
  | (Omit<CommandExecutor<T, P>, 'mode' | 'pool'> & {
      /** Default 'SCHEDULED': inline in the poll loop, so no pool. */
      readonly mode?: 'SCHEDULED';
      readonly pool?: never;
    })
  | (Omit<CommandExecutor<T, P>, 'mode' | 'pool'> & {
      readonly mode: 'ASYNC_POOL' | 'IMMEDIATE';
      /** Name of an isolated pool (declared in the runtime's `pools` option); default: the shared pool. */
      readonly pool?: string;
    });

/**
 * A plain-object executor with its command type, payload type and mode/pool pairing checked at the
 * definition (a payload type holding a Date does not compile: see PayloadTypeRules).
 */
export function defineExecutor<T extends string, P>(
  executor: ExecutorDefinition<T, P> & PayloadTypeRules<P>,
): ExecutorDefinition<T, P> {
  return executor;
}

/**
 * A transactional executor with its command type, payload type and transaction handle checked at
 * the definition; the handle's type is the store's (`defineTransactionalExecutor<PoolClient>()`).
 */
export function defineTransactionalExecutor<Tx, TM extends CommandTypeMap = CommandTypeMap>() {
  return <T extends string, P>(
    executor: TransactionalExecutor<T, P, Tx, TM>,
  ): TransactionalExecutor<T, P, Tx, TM> => executor;
}

/**
 * Maps command types to payload types, for a typed client: `{ 'order.notify': NotifyPayload }`.
 * Derive it from executors with `PayloadMapOf<typeof executors[number]>` or write it by hand.
 */
export type CommandTypeMap = { readonly [type: string]: unknown };

export type PayloadMapOf<E> = {
  [X in E as X extends { readonly type: infer T extends string } ? T : never]: X extends {
    readonly type: infer T extends string;
    execute(payload: infer P, context: never): unknown;
  }
    ? string extends T
      ? unknown // executors typed only as AnyExecutor: any type, payload checked at run time
      : P
    : never;
};
