import type { CommandId } from '../command.js';
import type { SqlExecutor } from './sql-executor.js';

/*
 * The windows of leading-edge throttles (docs/flow-control.md): for each (type, key) a throttled
 * submit has used, when the key's next window opens and which command took the current one, in
 * `<table>_submit_windows`. The runtime reads and writes a key's row in the caller's transaction,
 * under the row's lock, so concurrent submits of one key take turns and a rollback leaves the
 * window as it was.
 */

/** A key's window as stored. */
export interface KeyWindow {
  /** When the key's next window opens (the runtime's clock, as due times). */
  readonly opensAt: Date;
  /** The command that took the current window. */
  readonly holder: CommandId;
}

/** The `<table>_submit_windows` rows. */
export interface SubmitWindowStore<Tx = unknown> {
  /**
   * Locks the row of (type, key) until the caller's transaction ends, inserting an empty one when
   * there is none, and answers the key's window; null when the key has none (or an empty one).
   */
  hold(tx: Tx | SqlExecutor, type: string, key: string): Promise<KeyWindow | null>;
  /** Writes the key's window on the row `hold` locked in this transaction. */
  set(tx: Tx | SqlExecutor, type: string, key: string, window: KeyWindow): Promise<void>;
  /**
   * Deletes up to `limit` rows whose window opened before `before` (and empty ones), the oldest
   * first; answers how many. A row deleted is a key with no window, as if it had never had one.
   */
  prune(before: Date, limit: number): Promise<number>;
}
