import {
  InvalidArgumentError,
  optionalText,
  requireInstant as coreRequireInstant,
  requireStoredTime,
  requireHeadersJson,
  requireId,
  requireInt,
  requirePayloadJson,
  requireToken,
  truncateErrorText,
} from '@asynccmd/core';
import type { ClaimRef, CommandId, NewCommand } from '@asynccmd/core';

/*
 * What PostgreSQL adds to core's input checks (core input-checks.ts): its timestamp text. Bad input
 * is refused with a typed error before any SQL runs, so it never poisons a caller's transaction
 * with a failed statement.
 */

export { optionalText };

/** A time to write (core's stored range), as ISO text with zone, which Postgres reads exactly. */
export function requireTime(what: string, value: unknown): string {
  return requireStoredTime(what, value).toISOString();
}

/** A time only compared with, clamped into the stored range, as ISO text. */
export function requireInstant(what: string, value: unknown): string {
  return coreRequireInstant(what, value).toISOString();
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
