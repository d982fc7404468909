import * as E from 'fp-ts/lib/Either.js';
import type { BackoffPolicy } from './backoff.js';
import { LATEST_STORED_TIME } from './command.js';
import { describeFailure, truncateErrorText } from './error-text.js';
import { IllegalTransitionError, StaleClaimError } from './errors.js';
import type { CommandStatus } from './status.js';

/**
 * The command state machine, plus CANCELLED for commands a person disposed of:
 *
 *   PENDING ──claim──▶ RUNNING ──succeed──▶ SUCCESS
 *      ▲                 │ fail (retries left)        ──▶ PENDING (backoff)
 *      │                 │ fail (retries exhausted)   ──▶ DEAD ──retry──▶ PENDING
 *      │                 │ reclaim (lease expired)    ──▶ PENDING (same due time), or DEAD past the rescue limit
 *      │                 │ release / requeue          ──▶ PENDING
 *      └─────────────────┘ kill ──▶ CANCELLED (also from WAITING, PENDING and DEAD); cancel: WAITING | PENDING ──▶ CANCELLED
 *   WAITING ──its dependencies finished──▶ PENDING (or CANCELLED, by its dependencies' rule):
 *   written by the store with the dependency's own transition (docs/workflows.md), never asked for.
 *
 * Adapters implement each transition as one guarded write (`WHERE status IN (sources)`), using
 * TRANSITION_SOURCES so the SQL and this model cannot drift apart.
 */
export type TransitionName =
  | 'claim'
  | 'succeed'
  | 'fail'
  | 'heartbeat'
  | 'release'
  | 'reclaim'
  | 'retry'
  | 'requeue'
  | 'kill'
  | 'cancel';

export const TRANSITION_SOURCES: { readonly [T in TransitionName]: readonly CommandStatus[] } = {
  claim: ['PENDING'],
  succeed: ['RUNNING'],
  fail: ['RUNNING'],
  heartbeat: ['RUNNING'],
  release: ['RUNNING'],
  reclaim: ['RUNNING'],
  retry: ['DEAD'],
  requeue: ['RUNNING'],
  // kill disposes of a command whatever it is doing; a running executor's outcome is then fenced out.
  kill: ['WAITING', 'PENDING', 'RUNNING', 'DEAD'],
  // cancel is the polite form: only before the command has started (before any irreversible point).
  cancel: ['WAITING', 'PENDING'],
};

/** The transitions a person may ask for through the admin API or CLI. */
export type AdminTransition = 'retry' | 'requeue' | 'kill' | 'cancel';
export const ADMIN_TRANSITIONS: readonly AdminTransition[] = ['retry', 'requeue', 'kill', 'cancel'];

/** Whether `transition` may start from `from`; the Left says why not, in words. */
export function checkTransition(
  transition: TransitionName,
  from: CommandStatus,
  commandId?: string,
): E.Either<IllegalTransitionError, CommandStatus> {
  const allowed = TRANSITION_SOURCES[transition];
  return allowed.includes(from)
    ? E.right(from)
    : E.left(new IllegalTransitionError(transition, from, allowed, commandId));
}

/** The part of a command the state machine reads and writes. */
export interface CommandState {
  readonly status: CommandStatus;
  readonly maxRetry: number;
  readonly retryCount: number;
  readonly rescueCount: number;
  readonly retryCountAtRetry: number;
  readonly rescueCountAtRetry: number;
  readonly claimToken: string | null;
  readonly nextRunAt: Date;
  readonly lastError: string | null;
}

export type TransitionError = IllegalTransitionError | StaleClaimError;
type Result = E.Either<TransitionError, CommandState>;

function from(
  transition: TransitionName,
  s: CommandState,
  token?: string,
): E.Either<TransitionError, CommandState> {
  return E.chain<TransitionError, CommandStatus, CommandState>(() =>
    token !== undefined && s.claimToken !== token ? E.left(new StaleClaimError()) : E.right(s),
  )(checkTransition(transition, s.status));
}

export function claim(s: CommandState, token: string): Result {
  return E.map((c: CommandState): CommandState => ({ ...c, status: 'RUNNING', claimToken: token }))(
    from('claim', s),
  );
}

/** Done: the error of an earlier attempt stays in the history, not in lastError. */
export function succeed(s: CommandState, token: string): Result {
  return E.map((c: CommandState): CommandState => ({
    ...c,
    status: 'SUCCESS',
    claimToken: null,
    lastError: null,
  }))(from('succeed', s, token));
}

/** What a failed attempt turns into; adapters write exactly this, fenced by the claim token. */
export interface FailureOutcome {
  readonly status: 'PENDING' | 'DEAD';
  readonly retryCount: number;
  readonly nextRunAt: Date;
  readonly lastError: string;
}

/** Retries the command has used of its `maxRetry`: those since the latest admin retry. */
export function retriesUsed(s: Pick<CommandState, 'retryCount' | 'retryCountAtRetry'>): number {
  return s.retryCount - s.retryCountAtRetry;
}

/** Retries the command has left before a failure makes it DEAD. */
export function retriesLeft(s: Pick<CommandState, 'maxRetry' | 'retryCount' | 'retryCountAtRetry'>): number {
  return Math.max(0, s.maxRetry - retriesUsed(s));
}

/**
 * A failed attempt: a retry at now + backoff(retries used) while retries remain, else a dead
 * letter. With maxRetry = 5 a command runs at most 6 times (from its submit, or from an admin retry).
 */
export function decideFailure(
  s: Pick<CommandState, 'maxRetry' | 'retryCount' | 'retryCountAtRetry'>,
  error: unknown,
  now: Date,
  backoff: BackoffPolicy,
): FailureOutcome {
  const lastError = truncateErrorText(describeFailure(error));
  const used = retriesUsed(s);
  if (used >= s.maxRetry) {
    return { status: 'DEAD', retryCount: s.retryCount + 1, nextRunAt: now, lastError };
  }
  // Whatever the policy answers (NaN, a negative or an absurd delay), the retry time is one every
  // store can write: recording the failure must never fail because of its backoff.
  const delay = backoff.delayMs(used);
  const at = now.getTime() + (delay > 0 ? delay : 0);
  return {
    status: 'PENDING',
    retryCount: s.retryCount + 1,
    nextRunAt: new Date(Math.max(now.getTime(), Math.min(at, LATEST_STORED_TIME))),
    lastError,
  };
}

/**
 * The outcome of an attempt that shutdown stopped, through no fault of its own: PENDING at its own
 * due time (its place in the queue kept), its retry count unchanged — and written as a failed
 * attempt, so the history shows it ran (it may have had effects) and why it stopped.
 */
export function decideShutdownAbort(
  s: Pick<CommandState, 'retryCount' | 'nextRunAt'>,
  reason: unknown,
): FailureOutcome {
  return {
    status: 'PENDING',
    retryCount: s.retryCount,
    nextRunAt: s.nextRunAt,
    lastError: truncateErrorText(describeFailure(reason)),
  };
}

export function fail(
  s: CommandState,
  token: string,
  error: unknown,
  now: Date,
  backoff: BackoffPolicy,
): Result {
  return E.map((c: CommandState): CommandState => {
    const o = decideFailure(c, error, now, backoff);
    return { ...c, ...o, claimToken: null };
  })(from('fail', s, token));
}

export function heartbeat(s: CommandState, token: string): Result {
  return from('heartbeat', s, token);
}

/** Claimed but never started (shutdown): back to PENDING with nothing counted against it. */
export function release(s: CommandState, token: string): Result {
  return E.map((c: CommandState): CommandState => ({ ...c, status: 'PENDING', claimToken: null }))(
    from('release', s, token),
  );
}

/** Default number of lease expiries a command survives before it is declared DEAD. */
export const DEFAULT_MAX_RESCUES = 5;

/**
 * A RUNNING command whose lease expired on the database clock: its instance is gone. It goes back
 * to PENDING keeping its due time — an orphan keeps its place in the queue rather than going behind
 * everything submitted since — unless it has already been rescued `maxRescues` times: a command
 * that crashes its process every time must not loop forever, so it becomes a dead letter a person
 * will see. The limit counts rescues since the latest admin retry.
 */
export function reclaim(s: CommandState, maxRescues: number = DEFAULT_MAX_RESCUES): Result {
  return E.map((c: CommandState): CommandState => {
    const rescueCount = c.rescueCount + 1;
    return rescueCount - c.rescueCountAtRetry > maxRescues
      ? { ...c, status: 'DEAD', claimToken: null, rescueCount, lastError: rescueLimitMessage(maxRescues) }
      : { ...c, status: 'PENDING', claimToken: null, rescueCount };
  })(from('reclaim', s));
}

export function rescueLimitMessage(maxRescues: number): string {
  return `lease expired more than ${maxRescues} times (the executing instance kept disappearing)`;
}

/**
 * A person's retry of a dead letter: fresh attempts, due now. The counts are kept (the record of
 * what happened); the retry budget and the rescue limit start again from them.
 */
export function retry(s: CommandState, now: Date): Result {
  return E.map((c: CommandState): CommandState => ({
    ...c,
    status: 'PENDING',
    claimToken: null,
    retryCountAtRetry: c.retryCount,
    rescueCountAtRetry: c.rescueCount,
    nextRunAt: now,
  }))(from('retry', s));
}

/** A person forces a (presumably hung) RUNNING command back to PENDING, due now. */
export function requeue(s: CommandState, now: Date): Result {
  return E.map((c: CommandState): CommandState => ({
    ...c,
    status: 'PENDING',
    claimToken: null,
    nextRunAt: now,
  }))(from('requeue', s));
}

export function kill(s: CommandState, reason?: string): Result {
  return E.map((c: CommandState): CommandState => ({
    ...c,
    status: 'CANCELLED',
    claimToken: null,
    lastError: reason === undefined ? c.lastError : truncateErrorText(reason),
  }))(from('kill', s));
}

export function cancel(s: CommandState, reason?: string): Result {
  return E.map((c: CommandState): CommandState => ({
    ...c,
    status: 'CANCELLED',
    claimToken: null,
    lastError: reason === undefined ? c.lastError : truncateErrorText(reason),
  }))(from('cancel', s));
}
