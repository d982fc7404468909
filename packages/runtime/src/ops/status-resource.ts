import {
  isTerminalOperationState,
  operationState,
  retriesLeft,
  type AttemptOutcome,
  type AttemptRecord,
  type CommandProgress,
  type CommandRecord,
  type CommandStatus,
  type OperationState,
} from '@asynccmd/core';
import { parseMountPath, requireCommandId } from './validation.js';

/**
 * A command as a list shows it (`GET /commands`, the dashboard's dead letters): the status
 * resource without its result, since a page of up to MAX_LIST_LIMIT commands could otherwise carry
 * that many results of up to maxResultBytes each. `GET /commands/:id` has the result.
 */
export interface CommandStatusListItem {
  readonly id: string;
  readonly type: string;
  readonly bizKey: string | null;
  readonly status: CommandStatus;
  /** accepted | processing | completed | follow_up_failed | cancelled */
  readonly operation: OperationState;
  /** Polling may stop (a follow_up_failed command may still be retried by a person). */
  readonly terminal: boolean;
  readonly attempts: {
    /** Failed attempts so far. */
    readonly failed: number;
    /** Retries allowed after the first attempt. */
    readonly maxRetry: number;
    /** Times it was taken back from an instance that went silent. */
    readonly rescued: number;
    /** Retries left before a failure makes it a dead letter (an admin retry restores maxRetry). */
    readonly retriesLeft: number;
  };
  /** Its latest attempts (at most 10), oldest first. */
  readonly history: readonly AttemptView[];
  /** What its executor last reported with `ctx.progress` (`done` of `total`); null when nothing. */
  readonly progress: CommandProgress | null;
  readonly nextRunAt: string;
  /** Claim order: lower numbers first. */
  readonly priority: number;
  /** Commands sharing it run one at a time, in submission order; null: none. */
  readonly orderingKey: string | null;
  readonly lastError: string | null;
  readonly owner: string | null;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly startedAt: string | null;
  readonly finishedAt: string | null;
  readonly links: { readonly self: string };
}

/**
 * The command as a caller with the admin token sees it (a stable operation id, the
 * current state, where to look next), error text included. The payload, headers and claim token
 * are left out all the same: a payload can carry data its submitter never meant to show an
 * operator. What anyone may see is `PublicCommandStatus` (public-status.ts).
 */
export interface CommandStatusResource extends CommandStatusListItem {
  /**
   * What the executor of the attempt that succeeded left with `ctx.setResult` (parsed JSON); null
   * until SUCCESS, and when it left none. Present in every answer, so a client need not test for it.
   */
  readonly result: unknown;
}

/** One attempt of the command. */
export interface AttemptView {
  readonly startedAt: string | null;
  readonly finishedAt: string;
  /** The runtime instance that ran it. */
  readonly instance: string | null;
  readonly outcome: AttemptOutcome;
  readonly error: string | null;
}

export function toAttemptView(a: AttemptRecord): AttemptView {
  return {
    startedAt: a.startedAt?.toISOString() ?? null,
    finishedAt: a.finishedAt.toISOString(),
    instance: a.instance,
    outcome: a.outcome,
    error: a.error,
  };
}

/** `basePath` is where the admin routes are mounted ('' or e.g. '/ops'). */
export function toStatusResource(c: CommandRecord, basePath = ''): CommandStatusResource {
  return { ...toStatusListItem(c, basePath), result: c.result ?? null };
}

/** The command as a list item: the status resource without the result. */
export function toStatusListItem(c: CommandRecord, basePath = ''): CommandStatusListItem {
  const operation = operationState(c);
  return {
    id: c.id,
    type: c.type,
    bizKey: c.bizKey,
    status: c.status,
    operation,
    terminal: isTerminalOperationState(operation),
    attempts: {
      failed: c.retryCount,
      maxRetry: c.maxRetry,
      rescued: c.rescueCount,
      retriesLeft: retriesLeft(c),
    },
    history: c.history.map(toAttemptView),
    progress: c.progress,
    nextRunAt: c.nextRunAt.toISOString(),
    priority: c.priority,
    orderingKey: c.orderingKey,
    lastError: c.lastError,
    owner: c.owner,
    createdAt: c.createdAt.toISOString(),
    updatedAt: c.updatedAt.toISOString(),
    startedAt: c.startedAt?.toISOString() ?? null,
    finishedAt: c.finishedAt?.toISOString() ?? null,
    links: { self: statusPath(c.id, basePath) },
  };
}

/**
 * The authenticated status URI of a command (`GET /commands/:id` needs the token). A 202 for API
 * clients points at `publicStatusPath` instead. Refuses a malformed id or base path.
 */
export function statusPath(id: string, basePath = ''): string {
  return `${parseMountPath('basePath', basePath)}/commands/${encodeURIComponent(requireCommandId(id))}`;
}

/** A progress in words: "3 of 10 (30%)", "-" for none; the percentage rounded down. */
export function formatProgress(progress: CommandProgress | null): string {
  if (progress === null) return '-';
  return `${progress.done} of ${progress.total} (${Math.floor((progress.done / progress.total) * 100)}%)`;
}
