import {
  COMMAND_STATUSES,
  InvalidArgumentError,
  isCommandStatus,
  LIMITS,
  parseCommandId,
  type CommandId,
  type CommandStatus,
  type ListQuery,
} from '@asynccmd/core';
import * as E from 'fp-ts/lib/Either.js';

/**
 * Validation of operator and HTTP input. Everything here throws core errors with stable codes
 * (INVALID_ID, INVALID_ARGUMENT), which the HTTP layer maps to 400 and the CLI to exit code 2.
 * Values that pass still reach SQL only as bound parameters: the store guarantees that.
 */

export const MAX_LIST_LIMIT = LIMITS.listRows;
export const DEFAULT_LIST_LIMIT = 50;
/** As long as a type a store keeps: one bound for every command type an operator names. */
const MAX_TYPE_LENGTH = LIMITS.typeChars;
const MAX_BIZ_KEY_LENGTH = 500;
const MAX_CURSOR_LENGTH = 512;
const MAX_REASON_LENGTH = 2_000;
// Cursors are opaque, but every adapter's is printable ASCII; anything else is not one of ours.
const CURSOR = /^[\x21-\x7e]+$/;

export function requireCommandId(input: unknown): CommandId {
  const id = parseCommandId(input);
  if (E.isLeft(id)) throw id.left;
  return id.right;
}

/** "DEAD", "dead" or "PENDING,RUNNING". */
export function parseStatuses(text: string): CommandStatus[] {
  const statuses = text
    .split(',')
    .map((s) => s.trim().toUpperCase())
    .filter((s) => s.length > 0);
  if (statuses.length === 0) throw new InvalidArgumentError('status must name at least one status');
  for (const s of statuses) {
    if (!isCommandStatus(s)) {
      throw new InvalidArgumentError(
        `${JSON.stringify(s.slice(0, 40))} is not a status (expected one of ${COMMAND_STATUSES.join(', ')})`,
      );
    }
  }
  return [...new Set(statuses as CommandStatus[])];
}

export function parseLimit(text: string, max: number = MAX_LIST_LIMIT): number {
  if (!/^\d{1,7}$/.test(text.trim())) {
    throw new InvalidArgumentError(`limit ${JSON.stringify(text.slice(0, 40))} is not a whole number`);
  }
  const n = Number(text.trim());
  if (n < 1 || n > max) throw new InvalidArgumentError(`limit must be between 1 and ${max}, not ${n}`);
  return n;
}

export function requireText(what: string, text: string, maxLength: number): string {
  if (text.length === 0) throw new InvalidArgumentError(`${what} must not be empty`);
  if (text.length > maxLength)
    throw new InvalidArgumentError(`${what} is longer than ${maxLength} characters`);
  return text;
}

export function parseType(text: string): string {
  return requireText('type', text, MAX_TYPE_LENGTH);
}

export function parseBizKey(text: string): string {
  return requireText('bizKey', text, MAX_BIZ_KEY_LENGTH);
}

export function parseCursor(text: string): string {
  requireText('cursor', text, MAX_CURSOR_LENGTH);
  if (!CURSOR.test(text)) throw new InvalidArgumentError('cursor is not one this API handed out');
  return text;
}

export function parseReason(input: unknown): string | undefined {
  if (input === undefined || input === null) return undefined;
  if (typeof input !== 'string') throw new InvalidArgumentError('reason must be a string');
  return requireText('reason', input, MAX_REASON_LENGTH);
}

/**
 * Where routes are mounted ('' or e.g. '/ops', '/admin/commands'): plain path segments only, never
 * '.' or '..', which a URL parser would fold into another path than the one configured.
 */
export function parseMountPath(what: string, input: unknown): string {
  if (typeof input !== 'string') throw new InvalidArgumentError(`${what} must be a string such as /ops`);
  const path = input.trim().replace(/\/+$/, '');
  if (path === '') return '';
  const segments = path.split('/').slice(1);
  if (
    !path.startsWith('/') ||
    !segments.every((s) => /^[A-Za-z0-9._~-]+$/.test(s) && s !== '.' && s !== '..')
  ) {
    throw new InvalidArgumentError(
      `${what} ${JSON.stringify(input.slice(0, 80))} must look like /ops or /admin/commands`,
    );
  }
  return path;
}

const LIST_PARAMETERS = new Set(['status', 'type', 'bizKey', 'cursor', 'limit']);

/**
 * `?status=DEAD,PENDING&type=&bizKey=&cursor=&limit=` → a store ListQuery. Unknown or repeated
 * parameters are refused rather than ignored: a typo such as `?stauts=DEAD` must not silently list
 * everything.
 */
export function parseListQuery(params: URLSearchParams): ListQuery {
  const seen = new Set<string>();
  for (const key of params.keys()) {
    if (!LIST_PARAMETERS.has(key)) {
      throw new InvalidArgumentError(
        `unknown query parameter ${JSON.stringify(key.slice(0, 40))} (expected ${[...LIST_PARAMETERS].join(', ')})`,
      );
    }
    if (seen.has(key)) throw new InvalidArgumentError(`query parameter ${key} is given more than once`);
    seen.add(key);
  }
  const status = params.get('status');
  const type = params.get('type');
  const bizKey = params.get('bizKey');
  const cursor = params.get('cursor');
  const limit = params.get('limit');
  return {
    ...(status !== null ? { status: parseStatuses(status) } : {}),
    ...(type !== null ? { type: parseType(type) } : {}),
    ...(bizKey !== null ? { bizKey: parseBizKey(bizKey) } : {}),
    ...(cursor !== null ? { cursor: parseCursor(cursor) } : {}),
    limit: limit !== null ? parseLimit(limit) : DEFAULT_LIST_LIMIT,
  };
}
