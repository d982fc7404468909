import type { CommandRecord } from '@asynccmd/core';

/** Every property optional, at every depth (arrays keep their length: each element is matched). */
export type DeepPartial<T> = T extends readonly (infer U)[]
  ? readonly DeepPartial<U>[]
  : T extends object
    ? { readonly [K in keyof T]?: DeepPartial<T[K]> }
    : T;

/**
 * What a submitted payload must look like: a partial object (only the properties given are
 * compared, recursively; arrays element by element and of the same length; other values with
 * Object.is), or a predicate over the payload and its command row.
 */
export type PayloadMatcher<P = unknown> =
  DeepPartial<P> | ((payload: P, command: CommandRecord<P>) => boolean);

export function matchesPayload<P>(
  matcher: PayloadMatcher<P> | undefined,
  command: CommandRecord<P>,
): boolean {
  if (matcher === undefined) return true;
  if (typeof matcher === 'function') {
    return (matcher as (payload: P, command: CommandRecord<P>) => boolean)(command.payload, command);
  }
  return matchesPartially(command.payload, matcher);
}

function matchesPartially(actual: unknown, expected: unknown): boolean {
  if (Array.isArray(expected)) {
    return (
      Array.isArray(actual) &&
      actual.length === expected.length &&
      expected.every((item, i) => matchesPartially(actual[i], item))
    );
  }
  if (isPlainObject(expected)) {
    if (!isPlainObject(actual)) return false;
    // An expected `undefined` matches an absent property (JSON payloads never hold undefined).
    return Object.entries(expected).every(([key, value]) =>
      matchesPartially(Object.hasOwn(actual, key) ? actual[key] : undefined, value),
    );
  }
  return Object.is(actual, expected);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** The matcher as a failure message shows it. */
export function describeMatcher(matcher: unknown): string {
  if (matcher === undefined) return 'any payload';
  if (typeof matcher === 'function') {
    return `a payload satisfying ${matcher.name ? `predicate ${matcher.name}` : 'the predicate'}`;
  }
  return `a payload matching ${compactJson(matcher)}`;
}

const MAX_LISTED = 20;
const MAX_PAYLOAD_TEXT = 160;

/** One line per submitted command (at most MAX_LISTED), oldest first, for failure messages. */
export function listCommands(commands: readonly CommandRecord[]): string {
  if (commands.length === 0) return 'Nothing was submitted.';
  const lines = commands
    .slice(0, MAX_LISTED)
    .map((c) => `  #${c.id} ${c.type} ${c.status} ${compactJson(c.payload)}`);
  if (commands.length > MAX_LISTED) lines.push(`  … and ${commands.length - MAX_LISTED} more`);
  return `Submitted (${commands.length}):\n${lines.join('\n')}`;
}

function compactJson(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > MAX_PAYLOAD_TEXT ? `${text.slice(0, MAX_PAYLOAD_TEXT - 1)}…` : text;
}
