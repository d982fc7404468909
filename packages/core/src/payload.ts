import { LIMITS } from './limits.js';
import * as E from 'fp-ts/lib/Either.js';
import {
  PayloadNotSerialisableError,
  PayloadTooLargeError,
  ResultNotSerialisableError,
  ResultTooLargeError,
} from './errors.js';

/** Default payload limit: a command carries a snapshot of facts, not documents. */
export const DEFAULT_MAX_PAYLOAD_BYTES = LIMITS.defaultPayloadBytes;

/**
 * Deepest nesting of arrays and objects a payload may have (`{}` is 1, `{"a":[]}` is 2). Facts do
 * not nest deeply; the bound keeps every walk over a payload (here, JSON.stringify, the database's
 * JSON parser) far from any stack limit.
 */
export const MAX_PAYLOAD_DEPTH = LIMITS.payloadDepth;

/**
 * Serialises a payload for the payload column, refusing what would not come back the same:
 * undefined (except as an object field, which JSON omits — an absent optional field, read back
 * absent), functions, symbols, BigInt, cycles, non-finite numbers, fields whose getter throws,
 * nesting deeper than MAX_PAYLOAD_DEPTH, and class instances, a Date among them (JSON would turn
 * it into a string the executor did not expect: send `toISOString()`); and a `__proto__` key (a
 * reader assigning the fields of a parsed payload would set an object's prototype). NUL and lone
 * surrogates in strings and keys are kept: JSON.stringify escapes them (`\u0000`, `\ud800`), so
 * every store keeps them as ASCII and they read back the same.
 */
export function serialisePayload(
  payload: unknown,
  maxBytes: number = DEFAULT_MAX_PAYLOAD_BYTES,
): E.Either<PayloadNotSerialisableError | PayloadTooLargeError, string> {
  const problem = findUnserialisable(payload);
  if (problem) return E.left(new PayloadNotSerialisableError(problem));
  let json: string;
  try {
    json = JSON.stringify(payload);
  } catch (e) {
    // A getter that answered the walk and then threw: still the payload's fault, still typed.
    return E.left(new PayloadNotSerialisableError(e instanceof Error ? e.message : String(e)));
  }
  const bytes = Buffer.byteLength(json, 'utf8');
  return bytes > maxBytes ? E.left(new PayloadTooLargeError(bytes, maxBytes)) : E.right(json);
}

/** The largest result a store keeps, as JSON bytes (the runtime's `maxResultBytes` is at most this). */
export const MAX_RESULT_BYTES = LIMITS.resultBytes;

/** Default result limit: a result says what was done (an id, a count), not the work itself. */
export const DEFAULT_MAX_RESULT_BYTES = LIMITS.defaultResultBytes;

/** Serialises an executor's result by the payload's rules, with errors that name it a result. */
export function serialiseResult(
  result: unknown,
  maxBytes: number = DEFAULT_MAX_RESULT_BYTES,
): E.Either<ResultNotSerialisableError | ResultTooLargeError, string> {
  return E.mapLeft((e: PayloadNotSerialisableError | PayloadTooLargeError) =>
    e instanceof PayloadTooLargeError
      ? new ResultTooLargeError(e.bytes, e.limit)
      : new ResultNotSerialisableError(e.message.replace(/^payload is not JSON-serialisable: /, '')),
  )(serialisePayload(result, maxBytes));
}

/** A value still to look at, with where it sits and how deep. */
interface Visit {
  readonly value: unknown;
  readonly path: string;
  readonly depth: number;
  /** Set on the marker pushed after a container's children: the walk has left it. */
  readonly leaving?: object;
}

/**
 * The first problem in document order, or null. Iterative, with an explicit stack, so a hostile
 * depth is reported rather than overflowing the call stack.
 */
function findUnserialisable(root: unknown): string | null {
  const onPath = new Set<object>();
  const stack: Visit[] = [{ value: root, path: '$', depth: 0 }];
  for (let visit = stack.pop(); visit !== undefined; visit = stack.pop()) {
    if (visit.leaving) {
      onPath.delete(visit.leaving);
      continue;
    }
    const { value, path, depth } = visit;
    const scalar = scalarProblem(value, path);
    if (scalar !== undefined) {
      if (scalar !== null) return scalar;
      continue;
    }
    const obj = value as object;
    // Only a container on the current path is a cycle; one shared by two fields is fine.
    if (onPath.has(obj)) return `${path} refers back to itself (a cycle)`;
    if (depth >= MAX_PAYLOAD_DEPTH) {
      return `${path} is nested deeper than ${MAX_PAYLOAD_DEPTH} levels of arrays and objects`;
    }
    const children = childrenOf(obj, path);
    if (typeof children === 'string') return children;
    onPath.add(obj);
    stack.push({ value: null, path, depth, leaving: obj });
    // Pushed last first, so the first child is looked at first.
    for (let i = children.length - 1; i >= 0; i--) {
      const [childPath, child] = children[i]!;
      stack.push({ value: child, path: childPath, depth: depth + 1 });
    }
  }
  return null;
}

/** null: a fine scalar; a string: its problem; undefined: a container, to be walked. */
function scalarProblem(value: unknown, path: string): string | null | undefined {
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
  if (value === null) return null;
  if (value instanceof Date) {
    return Number.isFinite(value.getTime())
      ? `${path} is a Date, which JSON turns into a string: send ${path.replace(/^\$\.?/, '') || 'it'}.toISOString() and type the field as a string`
      : `${path} is an invalid Date, which JSON turns into null`;
  }
  return undefined;
}

/** A lone surrogate: half of a UTF-16 pair without its other half. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** What is wrong with a key of a payload object at `path`, or null. */
function keyProblem(key: string, path: string): string | null {
  return key === '__proto__'
    ? `${path} has a "__proto__" key, which a reader copying the fields would take for the prototype`
    : null;
}

/**
 * The same rules over payload JSON a store is handed, as text and as parsed (`value`): no
 * `__proto__` key, and no lone surrogate written out unescaped (UTF-8 cannot keep one; JSON.stringify
 * escapes it). Null when it breaks none of them.
 */
export function jsonTextProblem(text: string, value: unknown): string | null {
  if (LONE_SURROGATE.test(text)) {
    return 'it holds an unescaped lone surrogate, which UTF-8 cannot keep (write it as \\uXXXX, as JSON.stringify does)';
  }
  let problem: string | null = null;
  const visit = (v: unknown, path: string): void => {
    if (problem !== null) return;
    if (Array.isArray(v)) v.forEach((item, i) => visit(item, `${path}[${i}]`));
    else if (typeof v === 'object' && v !== null) {
      for (const [key, item] of Object.entries(v)) {
        problem = keyProblem(key, path);
        if (problem !== null) return;
        visit(item, `${path}.${key}`);
      }
    }
  };
  visit(value, '$');
  return problem;
}

/** The (path, value) pairs inside an array or plain object, or what is wrong with it. */
function childrenOf(obj: object, path: string): [string, unknown][] | string {
  try {
    if (Array.isArray(obj)) return Array.from(obj, (v: unknown, i) => [`${path}[${i}]`, v]);
    const proto = Object.getPrototypeOf(obj) as unknown;
    if (proto !== Object.prototype && proto !== null) {
      const name = (obj.constructor as { name?: string } | undefined)?.name ?? 'unknown';
      return `${path} is an instance of ${name}, not a plain object (snapshot the facts instead)`;
    }
    const children: [string, unknown][] = [];
    for (const key of Object.keys(obj)) {
      const badKey = keyProblem(key, path);
      if (badKey !== null) return badKey;
      let v: unknown;
      try {
        v = (obj as Record<string, unknown>)[key];
      } catch (e) {
        return `${path}.${key} could not be read (${describeThrown(e)})`;
      }
      // An absent optional field: JSON omits it, and so does the reader.
      if (v !== undefined) children.push([`${path}.${key}`, v]);
    }
    return children;
  } catch (e) {
    // A proxy or an exotic object whose traps throw.
    return `${path} could not be read (${describeThrown(e)})`;
  }
}

function describeThrown(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

/**
 * Whether JSON text nests arrays and objects deeper than `max`: one pass over the text, brackets
 * inside strings not counted. For text that is valid JSON (check that separately).
 */
export function jsonNestsDeeperThan(json: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
  }
  return false;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
