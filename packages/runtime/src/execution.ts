import type { ClaimedCommand, ClaimRef } from '@asynccmd/core';
import type { RegisteredExecutor } from './executor-registry.js';
import type { HeldLease } from './lease-keeper.js';
import type { PoolJob } from './work-pool.js';

export type ExecutionState = 'claimed' | 'running' | 'finishing' | 'done';

/** Why an execution's signal was aborted. */
export type AbortCause = 'timeout' | 'lease-lost' | 'shutdown';

/** One claim of one command, from claim to recorded outcome. */
export class Execution implements PoolJob, HeldLease {
  state: ExecutionState = 'claimed';
  readonly controller = new AbortController();
  abortCause: AbortCause | null = null;
  /** Set once a pool accepted it: how `run` reports where it ran. */
  poolName: string | null = null;
  releaseLease: () => void = () => undefined;
  /** Set by the runner: forgets a claim that will never run (taken away before it started). */
  drop: () => void = () => undefined;

  constructor(
    readonly command: ClaimedCommand,
    readonly entry: RegisteredExecutor,
    readonly via: 'poll' | 'immediate',
    private readonly runIn: (execution: Execution, runner: string) => Promise<void>,
  ) {}

  get ref(): ClaimRef {
    return { id: this.command.id, token: this.command.claimToken };
  }

  get leaseMs(): number {
    return this.entry.leaseMs;
  }

  run(): Promise<void> {
    return this.runIn(this, `pool:${this.poolName ?? '?'}`);
  }

  abort(cause: AbortCause, reason: Error): void {
    if (this.controller.signal.aborted) return;
    this.abortCause = cause;
    this.controller.abort(reason);
  }

  lost(): void {
    if (this.state === 'claimed')
      this.drop(); // never starts; the store already moved on
    else if (this.state === 'running') {
      this.abort('lease-lost', namedError('LeaseLostError', 'the claim was taken away while running'));
    }
  }
}

export function namedError(name: string, message: string): Error {
  const e = new Error(message);
  e.name = name;
  return e;
}
