import * as E from 'fp-ts/lib/Either.js';
import {
  InvalidArgumentError,
  isCommandStatus,
  parseCommandId,
  PayloadNotSerialisableError,
  PayloadTooLargeError,
  truncateErrorText,
} from '@asynccmd/core';
import type { ClaimRef, CommandId, CommandStatus, NewCommand } from '@asynccmd/core';

/* Bad input is refused with a typed error before any SQL runs (and before a caller's transaction
 * is poisoned by a failed statement). */

export function requireId(id: unknown): CommandId {
  const parsed = parseCommandId(id);
  if (E.isLeft(parsed)) throw parsed.left;
  return parsed.right;
}

export function requireInt(what: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(`${what} must be an integer in [${min}, ${max}], got ${String(value)}`);
  }
  return value;
}

/** A valid Date, as text Postgres reads exactly (ISO with zone; years past 9999 lose the '+'). */
export function requireTime(what: string, value: unknown): string {
  if (!(value instanceof Date) || !Number.isFinite(value.getTime())) {
    throw new InvalidArgumentError(`${what} must be a valid Date`);
  }
  return value.toISOString().replace(/^\+/, '');
}

export function requireToken(token: unknown): string {
  if (typeof token !== 'string' || token === '') {
    throw new InvalidArgumentError('a claim token must be a non-empty string');
  }
  return token;
}

export function requireTypes(types: unknown): string[] {
  if (!Array.isArray(types) || !types.every((t) => typeof t === 'string')) {
    throw new InvalidArgumentError('types must be an array of command type names');
  }
  return types as string[];
}

export function requireStatuses(status: unknown): CommandStatus[] {
  const list = (Array.isArray(status) ? status : [status]) as unknown[];
  for (const s of list) {
    if (!isCommandStatus(s)) throw new InvalidArgumentError(`${JSON.stringify(s)} is not a command status`);
  }
  return list as CommandStatus[];
}

export function optionalText(what: string, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw new InvalidArgumentError(`${what} must be a string`);
  // PostgreSQL text cannot hold NUL; refuse it here rather than fail inside the caller's transaction.
  if (value.includes('\u0000')) throw new InvalidArgumentError(`${what} must not contain NUL characters`);
  return value;
}

/**
 * Error text for last_error: truncated as core says, with any NUL (which PostgreSQL text cannot
 * hold) replaced, so recording a failure never fails because of what the failure said.
 */
export function errorText(text: string): string {
  return truncateErrorText(text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text);
}

export function reasonText(reason: unknown): string | null {
  if (reason === undefined || reason === null) return null;
  if (typeof reason !== 'string') throw new InvalidArgumentError('reason must be a string');
  return errorText(reason);
}

/** Parallel arrays of ids and tokens for the fenced batch statements. */
export function refArrays(refs: readonly ClaimRef[]): [CommandId[], string[]] {
  return [refs.map((r) => requireId(r.id)), refs.map((r) => requireToken(r.token))];
}

/** One command's column values, in the order of sql.ts's insert parameters. */
export interface CommandValues {
  readonly type: string;
  readonly bizKey: string | null;
  readonly payloadJson: string;
  readonly maxRetry: number;
  readonly runAt: string | null;
  readonly owner: string | null;
  readonly headersJson: string;
}

export function commandValues(c: NewCommand, maxPayloadBytes: number): CommandValues {
  const type = optionalText('type', c.type);
  if (!type) throw new InvalidArgumentError('a command needs a type');
  if (typeof c.payloadJson !== 'string') {
    throw new PayloadNotSerialisableError('payloadJson must be the JSON text of the payload');
  }
  const bytes = Buffer.byteLength(c.payloadJson, 'utf8');
  if (bytes > maxPayloadBytes) throw new PayloadTooLargeError(bytes, maxPayloadBytes);
  try {
    JSON.parse(c.payloadJson);
  } catch (e) {
    // A row whose payload cannot be parsed would poison every claim that reads it.
    throw new PayloadNotSerialisableError(`payloadJson is not valid JSON (${(e as Error).message})`);
  }
  const headers = c.headers ?? {};
  for (const [k, v] of Object.entries(headers)) {
    if (typeof v !== 'string') throw new InvalidArgumentError(`header ${JSON.stringify(k)} must be a string`);
  }
  return {
    type,
    bizKey: optionalText('bizKey', c.bizKey),
    payloadJson: c.payloadJson,
    maxRetry: requireInt('maxRetry', c.maxRetry, 0, 2 ** 31 - 1),
    runAt: c.runAt === undefined || c.runAt === null ? null : requireTime('runAt', c.runAt),
    owner: optionalText('owner', c.owner),
    headersJson: JSON.stringify(headers),
  };
}
