import { TransactionRolledBackError } from '@asynccmd/core';
import type { ClientBase, Connection, Submittable } from 'pg';

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

type Row = Record<string, string | null>;

/**
 * Sends COMMIT — and, when `after` is given, the statements to run once it is done, in one write
 * and one round trip (extended protocol, one Sync) — then tells the outcomes apart. The commit
 * decides whether the call fails; a failure of what came after is reported in the outcome, since
 * the transaction has committed. What comes after runs in one implicit transaction of its own,
 * never in the caller's. A COMMIT answered with ROLLBACK (a statement in the transaction had
 * failed and its error was caught) rejects with TransactionRolledBackError.
 */
export function commit(client: ClientBase, after?: AfterCommit): Promise<CommitOutcome> {
  const statement = new CommitStatement(after);
  client.query(statement);
  return statement.done;
}

class CommitStatement implements Submittable {
  readonly done: Promise<CommitOutcome>;
  /** The first command tag: COMMIT, or ROLLBACK for a transaction that had failed. */
  #tag: string | null = null;
  #fields: string[] = [];
  readonly #rows: Row[] = [];
  #settle!: (outcome: { error: Error } | { ok: CommitOutcome }) => void;
  /** Set when this batch prepares the named query: recorded as prepared once it all went well. */
  #preparing: { connection: Connection; name: string; text: string } | null = null;

  constructor(private readonly after: AfterCommit | undefined) {
    this.done = new Promise((resolve, reject) => {
      this.#settle = (outcome) => ('error' in outcome ? reject(outcome.error) : resolve(outcome.ok));
    });
  }

  submit(connection: Connection): void {
    const { after } = this;
    if (after === undefined || (after.statement === undefined && after.query === undefined)) {
      connection.query('COMMIT');
      return;
    }
    // One write: the server runs them in order and answers once, at the Sync.
    connection.stream.cork?.();
    try {
      run(connection, 'COMMIT');
      if (after.statement !== undefined) run(connection, after.statement);
      if (after.query !== undefined) this.#runQuery(connection, after.query);
      connection.sync();
    } finally {
      connection.stream.uncork?.();
    }
  }

  handleCommandComplete(msg: { text?: string }): void {
    this.#tag ??= msg.text ?? '';
  }

  handleRowDescription(msg: { fields: readonly { name: string }[] }): void {
    this.#fields = msg.fields.map((f) => f.name);
  }

  handleDataRow(msg: { fields: readonly (string | null)[] }): void {
    const row: Row = {};
    this.#fields.forEach((name, i) => (row[name] = msg.fields[i] ?? null));
    this.#rows.push(row);
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

  #runQuery(connection: Connection, query: NonNullable<AfterCommit['query']>): void {
    const { name = '', text, values } = query;
    const prepared = preparedStatements(connection);
    if (name !== '' && prepared[name] !== text) {
      // Closing first makes the Parse safe even if an earlier batch created it and then failed.
      connection.close({ type: 'S', name }, true);
      connection.parse({ name, text, types: [] }, true);
      this.#preparing = { connection, name, text };
    } else if (name === '') connection.parse({ name, text, types: [] }, true);
    connection.bind({ statement: name, values: [...values] }, true);
    connection.describe({ type: 'P', name: '' }, true);
    connection.execute({}, true); // all rows
  }

  #end(err: Error | null): void {
    if (err === null && this.#preparing) {
      const { connection, name, text } = this.#preparing;
      preparedStatements(connection)[name] = text;
    }
    if (this.#tag === 'COMMIT') this.#settle({ ok: { afterError: err, rows: err ? [] : this.#rows } });
    else if (this.#tag === 'ROLLBACK') this.#settle({ error: new TransactionRolledBackError() });
    else this.#settle({ error: err ?? new Error(`COMMIT answered ${this.#tag ?? 'nothing'}`) });
  }

  // Nothing here copies or suspends a portal; these exist because the client may call them.
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyInResponse(): void {}
  handleCopyData(): void {}
}

/** Parse, bind and execute one unnamed statement without values. */
function run(connection: Connection, text: string): void {
  connection.parse({ name: '', text, types: [] }, true);
  connection.bind({ values: [] }, true);
  connection.execute({}, true);
}

/**
 * pg's own record of the statements prepared on a connection (what its Query consults before
 * parsing a named statement again), kept up to date so both paths agree.
 */
function preparedStatements(connection: Connection): Record<string, string | undefined> {
  const c = connection as Connection & { parsedStatements?: Record<string, string | undefined> };
  c.parsedStatements ??= {};
  return c.parsedStatements;
}
