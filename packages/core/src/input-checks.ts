import * as E from 'fp-ts/lib/Either.js';
import type { CommandId, CommandRecord } from './command.js';
import { InvalidArgumentError, PayloadNotSerialisableError, PayloadTooLargeError } from './errors.js';
import { isCommandStatus } from './status.js';
import type { CommandStatus } from './status.js';
import { parseCommandId } from './command.js';
import type { FailureOutcome } from './transitions.js';

/*
 * The input checks every store adapter makes before any SQL runs (so bad input gets a typed error
 * and never poisons a caller's transaction with a failed statement). They throw: the store port's
 * methods reject on bad arguments.
 */

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

/** A valid Date (each adapter formats it for its own column type). */
export function requireDate(what: string, value: unknown): Date {
  if (!(value instanceof Date) || !Number.isFinite(value.getTime())) {
    throw new InvalidArgumentError(`${what} must be a valid Date`);
  }
  return value;
}

/** A failed attempt's outcome as stores write it (from decideFailure): PENDING or DEAD. */
export function requireFailureOutcome(outcome: unknown): FailureOutcome {
  const o = outcome as Partial<FailureOutcome> | null | undefined;
  if (o?.status !== 'PENDING' && o?.status !== 'DEAD') {
    throw new InvalidArgumentError(`a failed attempt ends PENDING or DEAD, not ${String(o?.status)}`);
  }
  if (typeof o.lastError !== 'string') throw new InvalidArgumentError('lastError must be a string');
  return {
    status: o.status,
    retryCount: requireInt('retryCount', o.retryCount, 0, 2 ** 31 - 1),
    nextRunAt: requireDate('nextRunAt', o.nextRunAt),
    lastError: o.lastError,
  };
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

/** Longest instance name a claim may carry (the narrowest column of the three databases). */
export const MAX_INSTANCE_CHARS = 128;

/** A claim's `instance`: a non-empty name of at most MAX_INSTANCE_CHARS characters, or none. */
export function optionalInstance(value: unknown): string | null {
  const text = optionalText('instance', value);
  if (text !== null && (text === '' || [...text].length > MAX_INSTANCE_CHARS)) {
    throw new InvalidArgumentError(`instance must be 1 to ${MAX_INSTANCE_CHARS} characters`);
  }
  return text;
}

export function optionalText(what: string, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw new InvalidArgumentError(`${what} must be a string`);
  return value;
}

/**
 * The payload column's text: within `maxBytes` of UTF-8 and valid JSON (a row whose payload cannot
 * be parsed would poison every claim that reads it).
 */
export function requirePayloadJson(payloadJson: unknown, maxBytes: number): string {
  if (typeof payloadJson !== 'string') {
    throw new PayloadNotSerialisableError('payloadJson must be the JSON text of the payload');
  }
  const bytes = Buffer.byteLength(payloadJson, 'utf8');
  if (bytes > maxBytes) throw new PayloadTooLargeError(bytes, maxBytes);
  try {
    JSON.parse(payloadJson);
  } catch (e) {
    throw new PayloadNotSerialisableError(`payloadJson is not valid JSON (${(e as Error).message})`);
  }
  return payloadJson;
}

/** Headers as the JSON text of a string map (default: none). */
export function requireHeadersJson(headers: unknown): string {
  const map = headers ?? {};
  if (typeof map !== 'object' || Array.isArray(map))
    throw new InvalidArgumentError('headers must be a string map');
  for (const [k, v] of Object.entries(map)) {
    if (typeof v !== 'string') throw new InvalidArgumentError(`header ${JSON.stringify(k)} must be a string`);
  }
  return JSON.stringify(map);
}

/**
 * Where a list page ended: its last (oldest) item's creation time and id. Lists run newest first by
 * (createdAt, id), the id breaking ties; the next page starts strictly below this position.
 */
export interface ListPosition {
  readonly createdAt: Date;
  readonly id: CommandId;
}

const CURSOR = /^c1:(0|[1-9][0-9]{0,15}):([1-9][0-9]{0,18})$/;
/** The latest time a Date holds. */
const MAX_TIME_MS = 8.64e15;

/** The opaque `nextCursor` of a list page whose last (oldest) item is `last`. */
export function encodeListCursor(last: Pick<CommandRecord, 'createdAt' | 'id'>): string {
  return Buffer.from(`c1:${last.createdAt.getTime()}:${last.id}`, 'utf8').toString('base64url');
}

/** The position a list cursor stands for; anything that is not a cursor a store handed out is refused. */
export function decodeListCursor(cursor: unknown): ListPosition {
  const text = typeof cursor === 'string' ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const m = CURSOR.exec(text);
  const ms = Number(m?.[1]);
  const id = m ? parseCommandId(m[2]) : null;
  if (!id || E.isLeft(id) || !(ms <= MAX_TIME_MS)) {
    throw new InvalidArgumentError('the list cursor is not one this store handed out');
  }
  return { createdAt: new Date(ms), id: id.right };
}
