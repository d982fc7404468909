import {
  InvalidArgumentError,
  optionalText as coreOptionalText,
  requireDate,
  requireHeadersJson,
  requireId,
  requireInt,
  requirePayloadJson,
  requireToken,
  truncateErrorText,
} from '@asynccmd/core';
import type { ClaimRef, CommandId, NewCommand } from '@asynccmd/core';

/*
 * What PostgreSQL adds to core's input checks (core input-checks.ts): its timestamp text, and text
 * without NUL. Bad input is refused with a typed error before any SQL runs, so it never poisons a
 * caller's transaction with a failed statement.
 */

/** A valid Date, as text Postgres reads exactly (ISO with zone; years past 9999 lose the '+'). */
export function requireTime(what: string, value: unknown): string {
  return requireDate(what, value).toISOString().replace(/^\+/, '');
}

/** Core's optionalText, refusing NUL too: PostgreSQL text cannot hold it. */
export function optionalText(what: string, value: unknown): string | null {
  const text = coreOptionalText(what, value);
  if (text?.includes('\u0000')) throw new InvalidArgumentError(`${what} must not contain NUL characters`);
  return text;
}

/**
 * Error text for last_error: truncated as core says, with any NUL replaced, so recording a failure
 * never fails because of what the failure said.
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

/** One command's column values, as the insert statements bind them. */
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
  return {
    type,
    bizKey: optionalText('bizKey', c.bizKey),
    payloadJson: requirePayloadJson(c.payloadJson, maxPayloadBytes),
    maxRetry: requireInt('maxRetry', c.maxRetry, 0, 2 ** 31 - 1),
    runAt: c.runAt === undefined || c.runAt === null ? null : requireTime('runAt', c.runAt),
    owner: optionalText('owner', c.owner),
    headersJson: requireHeadersJson(c.headers),
  };
}
