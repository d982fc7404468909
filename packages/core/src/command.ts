import * as E from 'fp-ts/lib/Either.js';
import { InvalidCommandIdError } from './errors.js';
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
  /** Retries allowed after the first attempt; the failure after the last retry makes it DEAD. */
  readonly maxRetry: number;
  /** Failed attempts so far. */
  readonly retryCount: number;
  /** Times the command was taken back from an instance that went silent (lease expired). */
  readonly rescueCount: number;
  /** Due time: a PENDING command is claimed only once this has passed. */
  readonly nextRunAt: Date;
  readonly lastError: string | null;
  /** The submitting service, for people reading the table. */
  readonly owner: string | null;
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
}

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
}

/**
 * The times a store writes (due times, retry times) lie in the years 1000 to 9999, UTC: the range
 * of MySQL's DATETIME, the narrowest of the databases, so every store keeps the same ones.
 */
export const EARLIEST_STORED_TIME = Date.UTC(1000, 0, 1);
export const LATEST_STORED_TIME = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
