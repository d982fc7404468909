import { TransactionRolledBackError } from '@asynccmd/core';
import type { ClientBase } from 'pg';
import { Batch, type BatchAnswer, type BatchStep } from './batch.js';
import { COMMIT_STEP } from './transaction-statements.js';
import { rolledBackIfAborted } from '../connection.js';

/** Statements to run right after COMMIT, in the same round trip (see `commit`). */
export interface AfterCommit {
  /** A statement without values, e.g. `NOTIFY "channel"`. */
  readonly statement?: string;
  /**
   * A statement with values (bound, as text) whose rows come back in the outcome; with a `name`, it
   * is prepared once per connection (planning it can cost more than running it).
   */
  readonly query?: {
    readonly name?: string;
    readonly text: string;
    readonly values: readonly (string | null)[];
  };
}

/** How a COMMIT that succeeded went on. */
export interface CommitOutcome {
  /** The statements after COMMIT failed (and were rolled back); the transaction itself stands. */
  readonly afterError: Error | null;
  /** The rows of `after.query`, every column as text. */
  readonly rows: readonly Record<string, string | null>[];
}

/**
 * Sends the transaction's last statements (`before`, held back until now), COMMIT and, when
 * `after` is given, the statements to run once it is done — in one write and one round trip — then
 * tells the outcomes apart. The commit decides whether the call fails; a failure of what came
 * after is reported in the outcome, since the transaction has committed. What comes after runs in
 * one implicit transaction of its own, never in the caller's. A statement of `before` that fails
 * means nothing was committed: the transaction is rolled back and the call rejects with its error.
 * A COMMIT answered with ROLLBACK (a statement in the transaction had failed and its error was
 * caught) rejects with TransactionRolledBackError.
 */
export async function commit(
  client: ClientBase,
  after?: AfterCommit,
  before: readonly BatchStep[] = [],
  commitStep: BatchStep = COMMIT_STEP,
): Promise<CommitOutcome> {
  const steps: BatchStep[] = [...before, commitStep];
  if (after?.statement !== undefined) steps.push({ text: after.statement });
  if (after?.query !== undefined) steps.push({ ...after.query, rows: true });
  const { tags, rows, error } = await runBatch(client, steps);
  if (before.length > 0 && tags.length <= before.length && error !== null) {
    // A statement ahead of COMMIT failed and the server skipped the rest: roll back, report it —
    // as a rolled-back transaction when it failed only because an earlier (caught) error had
    // already doomed it.
    await client.query('ROLLBACK').catch(() => undefined);
    throw rolledBackIfAborted(error, new TransactionRolledBackError());
  }
  const tag = tags[before.length];
  if (tag === 'COMMIT') return { afterError: error, rows: error ? [] : rows };
  if (tag === 'ROLLBACK') throw new TransactionRolledBackError();
  throw error ?? new Error(`COMMIT answered ${tag ?? 'nothing'}`);
}

/** Runs `steps` on `client` as one batch (see Batch). */
export function runBatch(client: ClientBase, steps: readonly BatchStep[]): Promise<BatchAnswer> {
  const batch = new Batch(steps);
  client.query(batch);
  return batch.done;
}
