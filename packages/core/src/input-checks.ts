import { LIMITS } from './limits.js';
import * as E from 'fp-ts/lib/Either.js';
import type { CommandId, CommandRecord } from './command.js';
import { InvalidArgumentError, PayloadNotSerialisableError, PayloadTooLargeError } from './errors.js';
import { jsonNestsDeeperThan, jsonTextProblem, MAX_PAYLOAD_DEPTH } from './payload.js';
import { isCommandStatus } from './status.js';
import type { CommandStatus } from './status.js';
import { EARLIEST_STORED_TIME, LATEST_STORED_TIME, parseCommandId } from './command.js';
import type { FailureOutcome } from './transitions.js';
import {
  MAX_HEALTH_PROBE_DEAD_LETTERS,
  MAX_OUTCOME_LATENCY_BOUNDS,
  MAX_TYPE_LIMIT,
  MAX_PAUSE_REASON_CHARS,
  ON_PENDING_CHOICES,
  type OnPending,
  type TypeLimit,
  type HealthProbeParams,
  type OutcomeCountParams,
} from './ports/store.js';

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

/** An idempotent submit's `onPending` choice; absent means 'keep'. */
export function requireOnPending(value: unknown): OnPending {
  if (value === undefined) return 'keep';
  const choice = ON_PENDING_CHOICES.find((c) => c === value);
  if (choice === undefined) {
    throw new InvalidArgumentError(
      `onPending must be one of ${ON_PENDING_CHOICES.map((c) => `'${c}'`).join(', ')}`,
    );
  }
  return choice;
}

/** A health probe's parameters; the adapter formats `now` for its own column type. */
export function requireHealthProbeParams(params: unknown): HealthProbeParams {
  if (typeof params !== 'object' || params === null) {
    throw new InvalidArgumentError('a health probe takes { now, deadLetterLimit }');
  }
  const { now, deadLetterLimit } = params as Record<string, unknown>;
  return {
    now: requireDate('now', now),
    deadLetterLimit: requireInt('deadLetterLimit', deadLetterLimit, 1, MAX_HEALTH_PROBE_DEAD_LETTERS),
  };
}

/** Latency bounds beyond this (about 31 years) bound nothing a command could take. */
const MAX_LATENCY_BOUND_MS = 1e12;

/** An outcome count's parameters: a time range and ascending latency bounds. */
export function requireOutcomeCountParams(params: unknown): OutcomeCountParams {
  if (typeof params !== 'object' || params === null) {
    throw new InvalidArgumentError('an outcome count takes { from, to, latencyBoundsMs }');
  }
  const { from, to, latencyBoundsMs } = params as Record<string, unknown>;
  const start = requireInstant('from', from);
  const end = requireInstant('to', to);
  if (end.getTime() < start.getTime()) throw new InvalidArgumentError('to must not be before from');
  if (!Array.isArray(latencyBoundsMs) || latencyBoundsMs.length > MAX_OUTCOME_LATENCY_BOUNDS) {
    throw new InvalidArgumentError(
      `latencyBoundsMs must be an array of at most ${MAX_OUTCOME_LATENCY_BOUNDS} numbers`,
    );
  }
  const bounds = latencyBoundsMs.map((b, i) =>
    requireInt(`latencyBoundsMs[${i}]`, b, 0, MAX_LATENCY_BOUND_MS),
  );
  for (let i = 1; i < bounds.length; i++) {
    if ((bounds[i] as number) <= (bounds[i - 1] as number)) {
      throw new InvalidArgumentError('latencyBoundsMs must be strictly ascending');
    }
  }
  return { from: start, to: end, latencyBoundsMs: bounds };
}

/** A valid Date (each adapter formats it for its own column type). */
export function requireDate(what: string, value: unknown): Date {
  if (!(value instanceof Date) || !Number.isFinite(value.getTime())) {
    throw new InvalidArgumentError(`${what} must be a valid Date`);
  }
  return value;
}

/** A time a store writes: a valid Date from EARLIEST_STORED_TIME to LATEST_STORED_TIME. */
export function requireStoredTime(what: string, value: unknown): Date {
  const ms = value instanceof Date ? value.getTime() : NaN;
  if (!(ms >= EARLIEST_STORED_TIME && ms <= LATEST_STORED_TIME)) {
    throw new InvalidArgumentError(
      `${what} must be a valid Date from ${new Date(EARLIEST_STORED_TIME).toISOString()} to ` +
        `${new Date(LATEST_STORED_TIME).toISOString()}`,
    );
  }
  return value as Date;
}

/**
 * A time a store only compares with (a claim's or a read's "now", a purge cutoff): any valid Date,
 * clamped into the stored range, beyond whose ends it compares the same.
 */
export function requireInstant(what: string, value: unknown): Date {
  const ms = requireDate(what, value).getTime();
  if (ms < EARLIEST_STORED_TIME) return new Date(EARLIEST_STORED_TIME);
  if (ms > LATEST_STORED_TIME) return new Date(LATEST_STORED_TIME);
  return value as Date;
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
    retryCount: requireInt('retryCount', o.retryCount, 0, LIMITS.intColumn),
    nextRunAt: requireStoredTime('nextRunAt', o.nextRunAt),
    lastError: o.lastError,
  };
}

export function requireToken(token: unknown): string {
  if (typeof token !== 'string' || token === '') {
    throw new InvalidArgumentError('a claim token must be a non-empty string');
  }
  return refuseNul('a claim token', token);
}

export function requireTypes(types: unknown): string[] {
  if (!Array.isArray(types) || !types.every((t) => typeof t === 'string')) {
    throw new InvalidArgumentError('types must be an array of command type names');
  }
  for (const t of types as string[]) refuseNul('a command type', t);
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
export const MAX_INSTANCE_CHARS = LIMITS.instanceChars;

/** A claim's `instance`: a non-empty name of at most MAX_INSTANCE_CHARS characters, or none. */
export function optionalInstance(value: unknown): string | null {
  const text = optionalText('instance', value);
  if (text !== null && (text === '' || [...text].length > MAX_INSTANCE_CHARS)) {
    throw new InvalidArgumentError(`instance must be 1 to ${MAX_INSTANCE_CHARS} characters`);
  }
  return text;
}

/**
 * Text a store keeps in a column or matches against one (type, bizKey, owner, tokens): no NUL
 * character, which PostgreSQL text cannot hold — so no store keeps one, and a filter naming one
 * is refused rather than matching nothing on some databases and failing on another.
 */
export function refuseNul(what: string, text: string): string {
  if (text.includes('\u0000')) throw new InvalidArgumentError(`${what} must not contain NUL characters`);
  return text;
}

/** Optional column text: absent (null), or a string without NUL (see refuseNul). */
export function optionalText(what: string, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw new InvalidArgumentError(`${what} must be a string`);
  return refuseNul(what, value);
}

/** A kill or cancel reason: any string (it is error text, which a store may clean of NUL). */
export function optionalReason(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw new InvalidArgumentError('reason must be a string');
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
  let parsed: unknown;
  try {
    parsed = JSON.parse(payloadJson);
  } catch (e) {
    throw new PayloadNotSerialisableError(`payloadJson is not valid JSON (${(e as Error).message})`);
  }
  if (jsonNestsDeeperThan(payloadJson, MAX_PAYLOAD_DEPTH)) {
    throw new PayloadNotSerialisableError(
      `payloadJson is nested deeper than ${MAX_PAYLOAD_DEPTH} levels of arrays and objects`,
    );
  }
  // After the depth check: the walk recurses.
  const problem = jsonTextProblem(payloadJson, parsed);
  if (problem !== null) throw new PayloadNotSerialisableError(`payloadJson: ${problem}`);
  return payloadJson;
}

/**
 * Bounds of a command's headers (trace context and the like, copied with every command): room for
 * a W3C traceparent, tracestate and a full baggage header, nothing like a document.
 */
export const HEADER_LIMITS = LIMITS.headers;

/** Headers as the JSON text of a string map within HEADER_LIMITS (default: none). */
export function requireHeadersJson(headers: unknown): string {
  const map = headers ?? {};
  if (typeof map !== 'object' || Array.isArray(map))
    throw new InvalidArgumentError('headers must be a string map');
  const entries = Object.entries(map);
  const { count, nameLength, valueLength, totalBytes } = HEADER_LIMITS;
  if (entries.length > count) {
    throw new InvalidArgumentError(`a command carries at most ${count} headers, not ${entries.length}`);
  }
  for (const [k, v] of entries) {
    const name = JSON.stringify(k.length > 40 ? `${k.slice(0, 40)}…` : k);
    if (k.length === 0 || k.length > nameLength) {
      throw new InvalidArgumentError(
        `header ${name} (${k.length} characters): headers have non-empty names of at most ${nameLength} characters`,
      );
    }
    if (typeof v !== 'string') throw new InvalidArgumentError(`header ${name} must be a string`);
    if (v.length > valueLength) {
      throw new InvalidArgumentError(
        `header ${name} is ${v.length} characters long: headers have values of at most ${valueLength} characters`,
      );
    }
  }
  const json = JSON.stringify(map);
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > totalBytes) {
    throw new InvalidArgumentError(
      `headers are ${bytes} bytes as JSON: at most ${totalBytes} bytes are allowed`,
    );
  }
  return json;
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

/** The longest type name a type limit stores (the narrowest type column of the adapters). */
export const MAX_LIMITED_TYPE_CHARS = LIMITS.typeChars;

/**
 * A command type a type limit or a type pause stores: 1..MAX_LIMITED_TYPE_CHARS characters, no NUL.
 * `what` names it in the error ("a type limit", "a type pause").
 */
export function requireStoredType(what: string, type: unknown): string {
  if (typeof type !== 'string' || type.length === 0 || [...type].length > MAX_LIMITED_TYPE_CHARS) {
    // What was given, never its text: a message must not echo megabytes of it.
    const given =
      typeof type === 'string' ? `${[...type].length} characters` : `${type === null ? 'null' : typeof type}`;
    throw new InvalidArgumentError(
      `${what} needs a command type of 1 to ${MAX_LIMITED_TYPE_CHARS} characters, got ${given}`,
    );
  }
  return refuseNul('a command type', type);
}

/** A type pause's reason: absent (null), or a string of at most MAX_PAUSE_REASON_CHARS without NUL. */
export function optionalPauseReason(reason: unknown): string | null {
  if (reason === undefined || reason === null) return null;
  if (typeof reason !== 'string' || [...reason].length > MAX_PAUSE_REASON_CHARS) {
    throw new InvalidArgumentError(
      `a pause reason must be a string of at most ${MAX_PAUSE_REASON_CHARS} characters`,
    );
  }
  return refuseNul('a pause reason', reason);
}

/**
 * The limits a TypeLimitStore declares: each a command type (1..MAX_LIMITED_TYPE_CHARS characters,
 * no NUL) given once, with a limit that is an integer in 1..MAX_TYPE_LIMIT.
 */
export function requireTypeLimits(limits: unknown): TypeLimit[] {
  if (!Array.isArray(limits))
    throw new InvalidArgumentError('type limits must be an array of { type, maxRunning }');
  const seen = new Set<string>();
  return (limits as unknown[]).map((l) => {
    const entry = (typeof l === 'object' && l !== null ? l : {}) as Record<string, unknown>;
    const { type: given, maxRunning } = entry;
    const type = requireStoredType('a type limit', given);
    if (seen.has(type)) throw new InvalidArgumentError(`type "${type}" has two limits`);
    seen.add(type);
    return { type, maxRunning: requireInt(`the limit of type "${type}"`, maxRunning, 1, MAX_TYPE_LIMIT) };
  });
}
