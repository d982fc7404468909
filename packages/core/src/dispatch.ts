/**
 * How a command type runs once claimed:
 * - SCHEDULED: inline in the poll loop, one after another; for light, quick work.
 * - ASYNC_POOL: handed to a pool (the type's own, or the shared one) so slow work never blocks the loop.
 * - IMMEDIATE: claimed by id right after the submitting transaction commits, then run in a pool;
 *   the poll loop is the safety net if the process dies first.
 */
export type ExecutionMode = 'SCHEDULED' | 'ASYNC_POOL' | 'IMMEDIATE';

export const EXECUTION_MODES: readonly ExecutionMode[] = ['SCHEDULED', 'ASYNC_POOL', 'IMMEDIATE'];

/** Where one claimed command goes. */
export type DispatchDecision =
  | { readonly kind: 'inline' }
  | { readonly kind: 'pool' }
  /** The pool is full: whoever holds the command runs it now (back-pressure; nothing is dropped). */
  | { readonly kind: 'caller-runs' };

export interface PoolCapacity {
  /** Slots that can start work now, counting queue room. */
  readonly free: number;
}

export function decideDispatch(mode: ExecutionMode, pool: PoolCapacity | null): DispatchDecision {
  if (mode === 'SCHEDULED' || pool === null) return { kind: 'inline' };
  return pool.free > 0 ? { kind: 'pool' } : { kind: 'caller-runs' };
}
