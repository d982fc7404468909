import { decideDispatch } from '@asynccmd/core';
import type { Execution } from './execution.js';
import type { PoolSet } from './pool-set.js';

/** Work the holder of a command must run itself, now: SCHEDULED inline, or caller-runs back-pressure. */
export interface RunHere {
  readonly execution: Execution;
  /** Where it runs, for the started event: its mode says inline, or its pool was full. */
  readonly runner: 'inline' | 'caller';
}

/**
 * Sends a claimed command where its mode says (core decideDispatch): SCHEDULED inline; ASYNC_POOL
 * and IMMEDIATE to the type's isolated pool or the shared pool; a full pool hands the work back to
 * the caller (caller-runs) so nothing is dropped and the caller slows down.
 */
export class Dispatcher {
  constructor(private readonly pools: PoolSet) {}

  /**
   * Returns null when a pool took the command, else the work to run here (in order, serially).
   * `claimedForRoom`: the command was claimed for free places of its pool (a poll round sizes its
   * claim by them), so the pool queues it rather than handing it back (see WorkPool.admit).
   */
  dispatch(execution: Execution, claimedForRoom = false): RunHere | null {
    const { entry } = execution;
    const pool = entry.pool === null ? null : this.pools.get(entry.pool);
    if (claimedForRoom && pool) {
      execution.poolName = pool.name;
      pool.admit(execution);
      return null;
    }
    const decision = decideDispatch(entry.mode, pool ? pool.capacity() : null);
    if (decision.kind === 'inline') return { execution, runner: 'inline' };
    if (decision.kind === 'pool' && pool) {
      execution.poolName = pool.name;
      if (pool.offer(execution)) return null;
    }
    return { execution, runner: 'caller' };
  }
}
