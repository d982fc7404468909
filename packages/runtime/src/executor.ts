import type { RecurringTick } from './recurring/tick.js';
import type { BackoffPolicy, ClaimedCommand, CommandId, ExecutionMode, Logger } from '@asynccmd/core';

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
}

/**
 * Runs one command type. A plain object or an (inversify `@injectable()`) class instance.
 * Delivery is at-least-once: `execute` must be idempotent.
 */
export interface CommandExecutor<T extends string = string, P = unknown> {
  readonly type: T;
  /** Default 'SCHEDULED': inline in the poll loop. */
  readonly mode?: ExecutionMode;
  /** Name of an isolated pool (declared in the runtime's `pools` option); default: the shared pool. */
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

/** An executor whose payload type is erased: what registries and options hold. */
// The payload parameter is contravariant, so `never` is what every executor is assignable to.
export type AnyExecutor = CommandExecutor<string, never>;

/** A plain-object executor with its command type and payload type checked at the definition. */
export function defineExecutor<T extends string, P>(executor: CommandExecutor<T, P>): CommandExecutor<T, P> {
  return executor;
}

/**
 * Maps command types to payload types, for a typed client: `{ 'order.notify': NotifyPayload }`.
 * Derive it from executors with `PayloadMapOf<typeof executors[number]>` or write it by hand.
 */
export type CommandTypeMap = { readonly [type: string]: unknown };

export type PayloadMapOf<E> = {
  [X in E as X extends CommandExecutor<infer T, infer _P> ? T : never]: X extends CommandExecutor<
    infer T,
    infer P
  >
    ? string extends T
      ? unknown // executors typed only as AnyExecutor: any type, payload checked at run time
      : P
    : never;
};
