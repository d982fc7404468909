import type { ClientBase, Pool, PoolClient } from 'pg';
import { commit, type AfterCommit, type CommitOutcome } from './commit.js';

export const BEGIN = 'BEGIN ISOLATION LEVEL READ COMMITTED';

/** Takes part in the store's own transactions: may add statements sent with their COMMIT. */
export interface CommitCompanion {
  opened(client: ClientBase, begin: DeferredBegin): void;
  /** What to run right after COMMIT in the same round trip, if anything. */
  withCommit(client: ClientBase): AfterCommit | undefined;
  /** The transaction is over: committed (with what came after), or not (null). */
  ended(client: ClientBase, outcome: CommitOutcome | null): void;
}

/**
 * A transaction's BEGIN, held back until its first statement so that the two can share a round
 * trip: the store's own single-row insert sends them as one batch (`take()`); any other statement
 * on the client sends BEGIN just ahead of itself (queued first on the same connection, as an
 * awaited BEGIN would have been). A transaction that runs no statement never begins at all.
 */
export class DeferredBegin {
  #sent = false;

  constructor(
    private readonly client: ClientBase,
    private readonly query: ClientBase['query'],
  ) {
    const send = (...args: unknown[]): unknown => {
      this.#ensure();
      return (this.query as (...a: unknown[]) => unknown).apply(client, args);
    };
    // An own property over pg's prototype method, for the transaction's duration (see restore).
    client.query = send as ClientBase['query'];
  }

  /** Whether BEGIN went out (or goes out with the statement that just took it). */
  get sent(): boolean {
    return this.#sent;
  }

  /** The BEGIN statement for the caller to send along with its own, or null once it went out. */
  take(): string | null {
    if (this.#sent) return null;
    this.#sent = true;
    return BEGIN;
  }

  /** Gives the client its own query method back. */
  restore(): void {
    delete (this.client as Partial<Pick<ClientBase, 'query'>>).query;
  }

  #ensure(): void {
    if (this.#sent) return;
    this.#sent = true;
    // Queued ahead of the statement that triggered it. Should it fail, that statement fails too
    // (the connection is gone: nothing else makes this BEGIN fail), and so does the transaction.
    (this.query as (text: string) => Promise<unknown>).call(this.client, BEGIN).catch(() => undefined);
  }
}

/**
 * Runs `fn` in a READ COMMITTED transaction on a client of `pool`: commits, or rolls back and
 * rethrows. While the client is checked out an 'error' listener is attached, because pg emits
 * 'error' on a client whose server connection dies, and an unheard 'error' would crash the process.
 * A client that failed is destroyed rather than returned to the pool.
 */
export async function runInTransaction<T>(
  pool: Pool,
  fn: (client: PoolClient) => Promise<T>,
  companion?: CommitCompanion,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  let outcome: CommitOutcome | null = null;
  const onError = (err: Error): void => {
    broken = err;
  };
  client.on('error', onError);
  const begin = new DeferredBegin(client, client.query);
  try {
    companion?.opened(client, begin);
    let result: T;
    try {
      result = await fn(client);
    } catch (err) {
      if (begin.sent) {
        await client.query('ROLLBACK').catch((rollbackError: unknown) => {
          broken ??= asError(rollbackError);
        });
      }
      throw err;
    }
    // (ROLLBACK and COMMIT pass through the held-back BEGIN untouched: it went out, or nothing ran.)
    // Nothing ran, nothing to commit (and nothing to announce or claim).
    outcome = begin.sent
      ? await commit(client, companion?.withCommit(client))
      : { afterError: null, rows: [] };
    return result;
  } catch (err) {
    // A failure of BEGIN or COMMIT leaves the session in an unknown state: do not reuse it.
    if (client.getTransactionStatus() !== 'I') broken ??= asError(err);
    throw err;
  } finally {
    begin.restore();
    companion?.ended(client, outcome);
    client.removeListener('error', onError);
    client.release(broken);
  }
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
