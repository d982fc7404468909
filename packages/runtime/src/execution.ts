import type { ClaimedCommand, ClaimRef } from '@asynccmd/core';
import type { RegisteredExecutor } from './executor-registry.js';
import type { HeldLease, LossNotice } from './services/lease-keeper.js';
import type { PoolJob, PoolJobTail } from './work-pool.js';

export type ExecutionState = 'claimed' | 'running' | 'finishing' | 'done';

/** Why an execution's signal was aborted. */
export type AbortCause = 'timeout' | 'lease-lost' | 'shutdown';

/** What runs an execution: the command runner. */
export interface ExecutionHost {
  /** Runs it; `runner` names where (null: in its pool, `pool:<name>`). Never rejects. */
  run(execution: Execution, runner: string | null): Promise<void | PoolJobTail>;
  /** Forgets a claim that will never run (taken away before it started). */
  drop(execution: Execution): void;
}

/** One claim of one command, from claim to recorded outcome. */
export class Execution implements PoolJob, HeldLease {
  state: ExecutionState = 'claimed';
  abortCause: AbortCause | null = null;
  /** Set once a pool accepted it: how `run` reports where it ran. */
  poolName: string | null = null;
  /** Set by the runner while the executor runs: stops waiting for it once aborted. */
  onAbort: ((reason: unknown) => void) | null = null;
  /** The per-type timeout's timer while the executor runs (none without a timeout). */
  timer: NodeJS.Timeout | null = null;
  /** What the executor (inside the interceptors) returned; set by the runner when it starts it. */
  ran: Promise<unknown> | null = null;
  /** How the claim was found taken away; null while it holds. */
  lostBy: LossNotice | null = null;
  /** What the executor left with ctx.setResult, as JSON text; undefined when nothing. */
  resultJson: string | undefined = undefined;
  readonly ref: ClaimRef;
  #controller: AbortController | null = null;

  constructor(
    readonly command: ClaimedCommand,
    readonly entry: RegisteredExecutor,
    readonly via: 'poll' | 'immediate',
    private readonly host: ExecutionHost,
    /** When the claim's statement was sent (performance.now()); heartbeats move it on. */
    public renewedAt: number,
  ) {
    this.ref = { id: command.id, token: command.claimToken };
  }

  /** The executor's signal, made on first use: most commands never look at it. */
  get signal(): AbortSignal {
    this.#controller ??= new AbortController();
    return this.#controller.signal;
  }

  /**
   * Settles when the executor itself has returned or thrown — later than the run, when it was
   * aborted and ignores (or takes time to obey) its signal.
   */
  get executorSettled(): Promise<void> {
    return this.ran === null ? Promise.resolve() : this.ran.then(settled, settled);
  }

  get leaseMs(): number {
    return this.entry.leaseMs;
  }

  run(): Promise<void | PoolJobTail> {
    return this.host.run(this, null);
  }

  abort(cause: AbortCause, reason: Error): void {
    if (this.abortCause !== null) return;
    this.abortCause = cause;
    this.#controller ??= new AbortController();
    this.#controller.abort(reason);
    this.onAbort?.(reason);
  }

  lost(notice: LossNotice): void {
    this.lostBy = notice;
    if (this.state === 'claimed')
      this.host.drop(this); // never starts; the store already moved on
    else if (this.state === 'running') {
      const how = { heartbeat: 'found by a heartbeat', requeue: 'requeued', kill: 'killed' }[notice];
      this.abort(
        'lease-lost',
        namedError('LeaseLostError', `the claim was taken away while running (${how})`),
      );
    }
  }
}

function settled(): void {}

export function namedError(name: string, message: string): Error {
  const e = new Error(message);
  e.name = name;
  return e;
}
