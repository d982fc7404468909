import * as E from 'fp-ts/lib/Either.js';
import { PayloadNotSerialisableError, PayloadTooLargeError } from './errors.js';

/** Default payload limit: a command carries a snapshot of facts, not documents. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 64 * 1024;

/**
 * Serialises a payload for the payload column, refusing what would not come back the same:
 * undefined (except as an omitted object field), functions, symbols, BigInt, cycles, non-finite numbers, and class instances other
 * than plain objects, arrays and Dates (which become ISO strings, as JSON always does).
 */
export function serialisePayload(
  payload: unknown,
  maxBytes: number = DEFAULT_MAX_PAYLOAD_BYTES,
): E.Either<PayloadNotSerialisableError | PayloadTooLargeError, string> {
  const problem = findUnserialisable(payload, '$', new Set());
  if (problem) return E.left(new PayloadNotSerialisableError(problem));
  let json: string;
  try {
    json = JSON.stringify(payload);
  } catch (e) {
    return E.left(new PayloadNotSerialisableError(e instanceof Error ? e.message : String(e)));
  }
  const bytes = Buffer.byteLength(json, 'utf8');
  return bytes > maxBytes ? E.left(new PayloadTooLargeError(bytes, maxBytes)) : E.right(json);
}

function findUnserialisable(value: unknown, path: string, seen: Set<object>): string | null {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return null;
    case 'number':
      return Number.isFinite(value) ? null : `${path} is ${value}, which JSON turns into null`;
    case 'undefined':
      return `${path} is undefined`;
    case 'bigint':
      return `${path} is a BigInt (send it as a string)`;
    case 'function':
    case 'symbol':
      return `${path} is a ${typeof value}`;
  }
  if (value === null || value instanceof Date) return null;
  const obj = value as object;
  if (seen.has(obj)) return `${path} refers back to itself (a cycle)`;
  seen.add(obj);
  try {
    if (Array.isArray(obj)) {
      for (let i = 0; i < obj.length; i++) {
        const p = findUnserialisable(obj[i], `${path}[${i}]`, seen);
        if (p) return p;
      }
      return null;
    }
    const proto = Object.getPrototypeOf(obj) as unknown;
    if (proto !== Object.prototype && proto !== null) {
      const name = (obj.constructor as { name?: string } | undefined)?.name ?? 'unknown';
      return `${path} is an instance of ${name}, not a plain object (snapshot the facts instead)`;
    }
    for (const [k, v] of Object.entries(obj)) {
      if (v === undefined) continue; // an absent optional field: JSON omits it, and so does the reader
      const p = findUnserialisable(v, `${path}.${k}`, seen);
      if (p) return p;
    }
    return null;
  } finally {
    seen.delete(obj);
  }
}
