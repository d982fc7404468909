import { InvalidArgumentError } from '../errors.js';
import { LIMITS } from '../limits.js';
import {
  refuseNul,
  requireId,
  requireInstant,
  requireInt,
  requireStoredTime,
  requireStoredType,
} from '../input-checks.js';
import type { SqlExecutor } from '../ports/sql-executor.js';
import type { KeyWindow, SubmitWindowStore } from '../ports/submit-windows.js';

/** The statements of an adapter's `<table>_submit_windows`, given checked input. */
export interface SubmitWindowStatements<Tx> {
  /** Locks (inserting an empty row when there is none) and reads the key's row. */
  readonly hold: (tx: Tx | SqlExecutor, type: string, key: string) => Promise<KeyWindow | null>;
  /** Writes the key's row. */
  readonly set: (tx: Tx | SqlExecutor, type: string, key: string, window: KeyWindow) => Promise<void>;
  /** Deletes up to `limit` rows opened before `before` or empty; how many. */
  readonly prune: (before: Date, limit: number) => Promise<number>;
}

/**
 * A key's window from the row a hold read back, its `opensMs` (epoch milliseconds) and `holder`
 * (the id) as text or numbers; null for an empty row (no window yet).
 */
export function keyWindowFromRow(row: Record<string, unknown> | undefined): KeyWindow | null {
  const opensMs = row?.['opensMs'];
  const holder = row?.['holder'];
  if (opensMs === null || opensMs === undefined || holder === null || holder === undefined) return null;
  return { opensAt: new Date(Number(opensMs)), holder: String(holder) };
}

/** The most rows one prune deletes (the runtime's largest purge batch). */
const MAX_WINDOW_PRUNE = 100_000;

/** A key of a submit window: 1..LIMITS.bizKeyChars characters, no NUL (it is a command's bizKey). */
function requireWindowKey(key: unknown): string {
  if (typeof key !== 'string' || key.length === 0 || [...key].length > LIMITS.bizKeyChars) {
    throw new InvalidArgumentError(
      `a submit window needs a key of 1 to ${LIMITS.bizKeyChars} characters, got ${
        typeof key === 'string' ? `${[...key].length} characters` : key === null ? 'null' : typeof key
      }`,
    );
  }
  return refuseNul('a submit window key', key);
}

/**
 * A SubmitWindowStore over the adapter's statements: every call's input is checked first.
 * `transaction` checks a caller's transaction as the store's submits do.
 */
export function submitWindowStore<Tx>(
  sql: SubmitWindowStatements<Tx>,
  transaction: (tx: unknown) => Tx | SqlExecutor,
): SubmitWindowStore<Tx> {
  return {
    hold: async (tx, type, key) =>
      sql.hold(transaction(tx), requireStoredType('a submit window', type), requireWindowKey(key)),
    set: async (tx, type, key, window) => {
      const handle = transaction(tx);
      const checked: KeyWindow = {
        opensAt: requireStoredTime('a submit window opensAt', window?.opensAt),
        holder: requireId(window?.holder),
      };
      return sql.set(handle, requireStoredType('a submit window', type), requireWindowKey(key), checked);
    },
    prune: async (before, limit) => {
      const cutoff = requireInstant('before', before);
      const n = requireInt('limit', limit, 0, MAX_WINDOW_PRUNE);
      return n === 0 ? 0 : sql.prune(cutoff, n);
    },
  };
}
