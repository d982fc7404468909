import { LIMITS } from './limits.js';
import * as E from 'fp-ts/lib/Either.js';
import { InvalidArgumentError, InvalidCommandIdError } from './errors.js';
import type { CommandStatus } from './status.js';

/**
 * A command id: the decimal text of a positive 64-bit integer. Text, not number, because BIGINT ids
 * pass 2^53 long before a busy table runs out of them (and pg hands them back as text anyway).
 */
export type CommandId = string;

const ID_PATTERN = /^[1-9][0-9]{0,18}$/;
const MAX_ID = 9223372036854775807n;

/** Parses untrusted input (a URL segment, a CLI argument) into a command id. */
export function parseCommandId(input: unknown): E.Either<InvalidCommandIdError, CommandId> {
  const text = typeof input === 'number' && Number.isSafeInteger(input) ? String(input) : input;
  if (typeof text !== 'string' || !ID_PATTERN.test(text) || BigInt(text) > MAX_ID) {
    return E.left(new InvalidCommandIdError(input));
  }
  return E.right(text);
}

/** JSON that survives a round trip through the payload column. */
export type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };

/** Small string map carried with a command, e.g. W3C `traceparent` of the submitter. */
export type CommandHeaders = Readonly<Record<string, string>>;

/** The row, as every adapter returns it. Times are JS Dates with millisecond precision. */
export interface CommandRecord<P = unknown> {
  readonly id: CommandId;
  readonly type: string;
  /** Business key for tracing, and for idempotency when `idempotent` is true. */
  readonly bizKey: string | null;
  readonly payload: P;
  readonly status: CommandStatus;
  /**
   * Retries allowed after the first attempt (counted since the latest admin retry); the failure
   * after the last of them makes it DEAD.
   */
  readonly maxRetry: number;
  /** Failed attempts so far, in all: an admin retry does not reset it. */
  readonly retryCount: number;
  /** Times the command was taken back from an instance that went silent (lease expired), in all. */
  readonly rescueCount: number;
  /**
   * retryCount and rescueCount when a person last retried the command (0 and 0 if never): the
   * retry budget (`maxRetry`) and the rescue limit count only what came after.
   */
  readonly retryCountAtRetry: number;
  readonly rescueCountAtRetry: number;
  /** Due time: a PENDING command is claimed only once this has passed. */
  readonly nextRunAt: Date;
  /** Claim order: lower numbers first, then due time, then id (see PRIORITY_RANGE). */
  readonly priority: number;
  /**
   * Commands sharing an ordering key run one at a time, in id order: one is claimed only when no
   * other of the key is RUNNING and none with a smaller id is PENDING, RUNNING or DEAD. Null: none.
   */
  readonly orderingKey: string | null;
  readonly lastError: string | null;
  /** The submitting service, for people reading the table. */
  readonly owner: string | null;
  /** The runtime instance holding (RUNNING) or that last held the claim; null if none named itself. */
  readonly claimedBy: string | null;
  /** The latest attempts (at most ATTEMPT_HISTORY_LENGTH), oldest first. */
  readonly history: readonly AttemptRecord[];
  /** Fresh token of the claim that holds a RUNNING command; null otherwise. */
  readonly claimToken: string | null;
  /** Database-clock deadline of a RUNNING command's lease; past it, the command is hung. */
  readonly leaseUntil: Date | null;
  /** Whether this command holds the (type, bizKey) idempotency key while unfinished. */
  readonly idempotent: boolean;
  readonly headers: CommandHeaders;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  /** When the latest claim started it. */
  readonly startedAt: Date | null;
  /** When it reached SUCCESS, DEAD or CANCELLED. */
  readonly finishedAt: Date | null;
  /**
   * What the executor of the attempt that succeeded left with `ctx.setResult` (as JSON gives it
   * back); null when it left none, and for a command that has not succeeded.
   */
  readonly result: unknown;
  /**
   * How far the command's executor said it had come (`ctx.progress`): the latest report of any of
   * its attempts (a retry shows the last one's until it reports again); null before any. A claim's
   * record does not read it (null there).
   */
  readonly progress: CommandProgress | null;
}

/**
 * How far a running command has come: `done` of `total` units of its work (rows imported, bytes
 * sent), whole numbers with 0 ≤ done ≤ total and total ≥ 1.
 */
export interface CommandProgress {
  readonly done: number;
  readonly total: number;
}

/** The largest `done` or `total` of a progress report: a whole number JavaScript holds exactly. */
export const MAX_PROGRESS = LIMITS.progress;

/** Checks a progress report (INVALID_ARGUMENT when it is not one): a copy of its two numbers. */
export function requireProgress(value: unknown): CommandProgress {
  const p = (typeof value === 'object' && value !== null ? value : {}) as Partial<Record<string, unknown>>;
  const { done, total } = p;
  const whole = (n: unknown, min: number): n is number =>
    typeof n === 'number' && Number.isSafeInteger(n) && n >= min;
  if (!whole(done, 0) || !whole(total, 1) || done > total) {
    throw new InvalidArgumentError(
      `progress takes { done, total }: whole numbers with 0 ≤ done ≤ total, total ≥ 1 and at most ${MAX_PROGRESS}`,
    );
  }
  return { done, total };
}

/** A progress report to store: the claim it is made under, and the progress. */
export interface ProgressReport extends ClaimRef, CommandProgress {}

/**
 * How an attempt ended: succeeded; failed (a retry is due) or dead (no retry left, or past the
 * rescue limit); lease_expired (its instance went silent: taken back); requeued or killed (a
 * person took the claim away while it ran).
 */
export type AttemptOutcome = 'succeeded' | 'failed' | 'dead' | 'lease_expired' | 'requeued' | 'killed';

export const ATTEMPT_OUTCOMES: readonly AttemptOutcome[] = [
  'succeeded',
  'failed',
  'dead',
  'lease_expired',
  'requeued',
  'killed',
];

/** One attempt in a command's history. Times are the database clock's. */
export interface AttemptRecord {
  /** When its claim started it. */
  readonly startedAt: Date | null;
  readonly finishedAt: Date;
  /** The runtime instance that ran it (the claim's `instance`); null if the claim named none. */
  readonly instance: string | null;
  readonly outcome: AttemptOutcome;
  /** The failure (as lastError keeps it), a kill's reason, or why it became DEAD; else null. */
  readonly error: string | null;
}

/** Attempts a command's history keeps: the latest ones, so a row stays small however often it runs. */
export const ATTEMPT_HISTORY_LENGTH = 10;

/** A RUNNING command as a claim hands it out: the token is what fences its outcome. */
export interface ClaimedCommand<P = unknown> extends CommandRecord<P> {
  readonly status: 'RUNNING';
  readonly claimToken: string;
}

/** Names one claim of one command: outcome writes must present both. */
export interface ClaimRef {
  readonly id: CommandId;
  readonly token: string;
}

/** A success to record: the claim it ran under and, when its executor left one, its result. */
export interface CompletedAttempt extends ClaimRef {
  /** The result as JSON text (see serialiseResult); absent when the executor left none. */
  readonly resultJson?: string;
}

/** What a submit writes. The payload is already serialised JSON text (see `serialisePayload`). */
export interface NewCommand {
  readonly type: string;
  readonly payloadJson: string;
  readonly bizKey?: string | null;
  /** Absolute due time; default: now (the store's clock at insert). */
  readonly runAt?: Date | null;
  readonly maxRetry: number;
  readonly owner?: string | null;
  readonly headers?: CommandHeaders;
  /** Lower numbers are claimed first; default DEFAULT_PRIORITY. Within PRIORITY_RANGE. */
  readonly priority?: number;
  /** See CommandRecord.orderingKey; at most MAX_ORDERING_KEY_CHARS characters. */
  readonly orderingKey?: string | null;
}

/**
 * Priorities a command may have: a SMALLINT on every database. Lower is more urgent, as in
 * graphile-worker and Oban; the order is strict (see docs/priorities-and-ordering.md).
 */
export const PRIORITY_RANGE = { min: -32768, max: 32767 } as const;
export const DEFAULT_PRIORITY = 0;
/** The longest ordering key, in characters (as a bizKey). */
export const MAX_ORDERING_KEY_CHARS = LIMITS.orderingKeyChars;

/**
 * The times a store writes (due times, retry times) lie in the years 1000 to 9999, UTC: the range
 * of MySQL's DATETIME, the narrowest of the databases, so every store keeps the same ones.
 */
export const EARLIEST_STORED_TIME = Date.UTC(1000, 0, 1);
export const LATEST_STORED_TIME = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
