import { InvalidArgumentError, type InsertResult, type OnPending, LIMITS } from '@asynccmd/core';

/*
 * Debounce and throttle on submit (the `submitWindows` option, client.submitCoalesced): a window
 * per command type over the type's idempotency key. The coalescing itself is the store's
 * replacing idempotent insert (insertIdempotent with onPending), atomic under concurrent submits
 * and inside the caller's transaction on every adapter; this file only decides the due time and
 * the onPending choice, and checks the specification.
 */

/** The longest window: Node's longest timer, about 24.8 days. */
export const MAX_SUBMIT_WINDOW_MS = 2 ** 31 - 1;

/** What a key function gets: the payload as submitted (its type is the command type's). */
type KeyOf = (payload: never) => string;

/**
 * Debounce: each submit of a key whose command is still PENDING gives it its payload (the last
 * payload wins) and moves its start to `debounceMs` after this submit.
 */
export interface DebounceWindow {
  readonly debounceMs: number;
  /** The key of a submit that names none (the option `key` of submitCoalesced wins). */
  readonly key?: KeyOf;
}

/**
 * Throttle. On the trailing edge (the default), the first submit of a key makes a command due
 * `throttleMs` later; submits while it is PENDING are dropped ('drop', the default) or give it
 * their payload without moving its start ('merge'). So a key's commands start at least
 * `throttleMs` apart.
 *
 * On the leading edge, the first submit of a quiet key makes a command due at once and opens a
 * window of `throttleMs`; submits within the window are dropped ('drop'), or ('merge') make one
 * command due when the window ends (it opens the next window), to which the later ones give their
 * payload. So a key's commands are due at least `throttleMs` apart, and the first without delay.
 */
export interface ThrottleWindow {
  readonly throttleMs: number;
  readonly later?: 'drop' | 'merge';
  /** Default 'trailing'. */
  readonly edge?: 'trailing' | 'leading';
  readonly key?: KeyOf;
}

export type SubmitWindow = DebounceWindow | ThrottleWindow;

/**
 * What a coalesced submit did:
 * - 'created': no command of the key was unfinished: this one was inserted (a new window);
 * - 'debounced': the key's PENDING command took this payload and starts `debounceMs` from now;
 * - 'throttled': the key's command stays due when it was (its payload replaced with 'merge',
 *   unchanged with 'drop'; with 'drop' also when it is RUNNING);
 * - 'running': the key's command is RUNNING (its executor has read the old payload): nothing of
 *   this submit was stored. Submit again once it has finished if this payload must run.
 */
export type CoalescedOutcome = 'created' | 'debounced' | 'throttled' | 'running';

export interface CoalescedSubmit extends InsertResult {
  readonly outcome: CoalescedOutcome;
}

/** What is wrong with one type's window ("…"), or null; `retentionMs` is the retention's olderThanMs. */
export function submitWindowProblem(spec: unknown, retentionMs: number | undefined): string | null {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    return 'must be { debounceMs, key? } or { throttleMs, later?, edge?, key? }';
  }
  const { debounceMs, throttleMs, later, edge, key, ...rest } = spec as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) {
    return `has no field \`${unknown}\` (fields: debounceMs or throttleMs, later, edge, key)`;
  }
  if ((debounceMs === undefined) === (throttleMs === undefined)) {
    return 'needs exactly one of `debounceMs` and `throttleMs`';
  }
  const [name, windowMs] = debounceMs !== undefined ? ['debounceMs', debounceMs] : ['throttleMs', throttleMs];
  if (
    typeof windowMs !== 'number' ||
    !Number.isInteger(windowMs) ||
    windowMs < 1 ||
    windowMs > MAX_SUBMIT_WINDOW_MS
  ) {
    return `${name} must be an integer from 1 to ${MAX_SUBMIT_WINDOW_MS} ms, got ${describe(windowMs)}`;
  }
  if (retentionMs !== undefined && windowMs > retentionMs) {
    return `${name} (${windowMs} ms) is longer than the retention's olderThanMs (${retentionMs} ms)`;
  }
  if (later !== undefined && (debounceMs !== undefined || (later !== 'drop' && later !== 'merge'))) {
    return debounceMs !== undefined
      ? '`later` belongs to a throttle window'
      : `later must be 'drop' or 'merge', got ${describe(later)}`;
  }
  if (edge !== undefined && (debounceMs !== undefined || (edge !== 'trailing' && edge !== 'leading'))) {
    return debounceMs !== undefined
      ? '`edge` belongs to a throttle window'
      : `edge must be 'trailing' or 'leading', got ${describe(edge)}`;
  }
  if (key !== undefined && typeof key !== 'function') {
    return `key must be a function (payload) => string, got ${describe(key)}`;
  }
  return null;
}

/** Checks the `submitWindows` option against the retention (undefined: none); throws INVALID_ARGUMENT. */
export function requireSubmitWindows(windows: unknown, retentionMs: number | undefined): void {
  if (windows === undefined) return;
  if (windows === null || typeof windows !== 'object' || Array.isArray(windows)) {
    throw new InvalidArgumentError('asynccmd option `submitWindows` must map command types to windows');
  }
  for (const [type, spec] of Object.entries(windows)) {
    if (type.length === 0 || [...type].length > LIMITS.typeChars || type.includes('\u0000')) {
      throw new InvalidArgumentError(
        `asynccmd option \`submitWindows\` has a type name that is not 1 to ${LIMITS.typeChars} characters without NUL`,
      );
    }
    const problem = submitWindowProblem(spec, retentionMs);
    if (problem)
      throw new InvalidArgumentError(`asynccmd option \`submitWindows\` type "${type}": ${problem}`);
  }
}

/** The key of a coalesced submit: the given one, else the window's key function's answer. */
export function coalescingKey(window: SubmitWindow, given: unknown, payload: unknown, type: string): string {
  let key = given;
  if (key === undefined) {
    if (window.key === undefined) {
      throw new InvalidArgumentError(
        `submitCoalesced of "${type}" needs a \`key\`: its window declares no key function`,
      );
    }
    try {
      key = (window.key as (payload: unknown) => unknown)(payload);
    } catch {
      throw new InvalidArgumentError(`the key function of "${type}"'s submit window threw`);
    }
    if (typeof key !== 'string') {
      throw new InvalidArgumentError(
        `the key function of "${type}"'s submit window returned ${describe(key)}, not a string`,
      );
    }
  }
  if (typeof key !== 'string' || key.length === 0) {
    throw new InvalidArgumentError(`submitCoalesced of "${type}" needs a non-empty string key`);
  }
  return key;
}

/** How the store's replacing insert carries out the window: its onPending and the due time. */
export function windowInsert(window: SubmitWindow, now: Date): { onPending: OnPending; runAt: Date } {
  if ('debounceMs' in window) {
    return { onPending: 'replace', runAt: new Date(now.getTime() + window.debounceMs) };
  }
  return {
    onPending: window.later === 'merge' ? 'replace-keep-run-at' : 'keep',
    runAt: new Date(now.getTime() + window.throttleMs),
  };
}

/** Whether the window is a leading-edge throttle (its key's windows kept in the store). */
export function isLeadingThrottle(window: SubmitWindow): window is ThrottleWindow {
  return 'throttleMs' in window && window.edge === 'leading';
}

/**
 * How a leading-edge throttle's submit goes, given the key's stored window (`opensAt`, null: none)
 * and now: 'open' (a command due now, opening a window), 'drop' (nothing stored: the window is
 * taken), or 'next' (a command due when the window ends, or this payload for the one there is).
 */
export function leadingStep(
  window: ThrottleWindow,
  opensAt: Date | null,
  now: Date,
): { readonly step: 'open' | 'drop' | 'next'; readonly runAt: Date } {
  if (opensAt === null || opensAt.getTime() <= now.getTime()) return { step: 'open', runAt: now };
  return { step: window.later === 'merge' ? 'next' : 'drop', runAt: opensAt };
}

/** The outcome of the store's answer under this window. */
export function coalescedOutcome(window: SubmitWindow, result: InsertResult): CoalescedOutcome {
  if (!result.duplicate) return 'created';
  const debounce = 'debounceMs' in window;
  if (result.replaced) return debounce ? 'debounced' : 'throttled';
  // Not replaced: a RUNNING holder, or a PENDING one a dropping throttle left as it was.
  return debounce || window.later === 'merge' ? 'running' : 'throttled';
}

function describe(v: unknown): string {
  return typeof v === 'number' || typeof v === 'boolean'
    ? String(v)
    : v === null
      ? 'null'
      : typeof v === 'string'
        ? JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)
        : typeof v;
}
