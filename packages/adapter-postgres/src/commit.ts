import { TransactionRolledBackError } from '@asynccmd/core';
import type { ClientBase, Connection, Submittable } from 'pg';

/** How a COMMIT (and the statement sent with it, if any) ended. */
export interface CommitOutcome {
  /** The statement after COMMIT failed although the commit succeeded; the transaction stands. */
  readonly afterError: Error | null;
}

/**
 * Sends `COMMIT` — or `COMMIT; <after>` as one simple-protocol message, so that `after` runs right
 * after the commit without another round trip to the client — and tells the two outcomes apart:
 * the commit decides whether the call fails; a failure of `after` alone is reported, not thrown,
 * since the transaction has committed. A COMMIT answered with ROLLBACK (a statement in the
 * transaction had failed and its error was caught) rejects with TransactionRolledBackError.
 *
 * `after` runs in its own implicit transaction once the commit is done; it must take no values
 * (no bound parameters in a multi-statement message): only statements built from validated names.
 */
export function commit(client: ClientBase, after?: string): Promise<CommitOutcome> {
  const statement = new CommitStatement(after === undefined ? 'COMMIT' : `COMMIT; ${after}`);
  client.query(statement);
  return statement.done;
}

class CommitStatement implements Submittable {
  readonly done: Promise<CommitOutcome>;
  /** The first command tag: COMMIT, or ROLLBACK for a transaction that had failed. */
  #tag: string | null = null;
  #settle!: (outcome: { error: Error } | { ok: CommitOutcome }) => void;

  constructor(private readonly text: string) {
    this.done = new Promise((resolve, reject) => {
      this.#settle = (outcome) => ('error' in outcome ? reject(outcome.error) : resolve(outcome.ok));
    });
  }

  submit(connection: Connection): void {
    connection.query(this.text);
  }

  handleCommandComplete(msg: { text?: string }): void {
    this.#tag ??= msg.text ?? '';
  }

  /**
   * An error answer (the client then drops this statement and ignores its ReadyForQuery) or the
   * connection lost: a commit not yet confirmed is unknown, reported as the error.
   */
  handleError(err: Error): void {
    this.#end(err);
  }

  handleReadyForQuery(): void {
    this.#end(null);
  }

  #end(err: Error | null): void {
    if (this.#tag === 'COMMIT') this.#settle({ ok: { afterError: err } });
    else if (this.#tag === 'ROLLBACK') this.#settle({ error: new TransactionRolledBackError() });
    else this.#settle({ error: err ?? new Error(`COMMIT answered ${this.#tag ?? 'nothing'}`) });
  }

  // Neither statement returns rows or copies; these exist because the client calls them.
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyInResponse(): void {}
  handleCopyData(): void {}
}
