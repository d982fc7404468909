import type { ClientBase, Pool, PoolClient } from 'pg';
import { Batch, type BatchStep } from './batch.js';
import { commit, runBatch, type AfterCommit, type CommitOutcome } from './commit.js';
import { rolledBackIfAborted } from '../connection.js';
import { queryBehind } from './query-behind-batch.js';
import { transactionSteps, type TransactionSteps } from './transaction-statements.js';

/** Takes part in the store's own transactions: may add statements sent with their COMMIT. */
export interface CommitCompanion {
  opened(client: ClientBase, deferred: DeferredStatements): void;
  /** What to run right after COMMIT in the same round trip, if anything. */
  withCommit(client: ClientBase): AfterCommit | undefined;
  /** The transaction is over: committed (with what came after), or not (null). */
  ended(client: ClientBase, outcome: CommitOutcome | null): void;
}

/**
 * What a store transaction holds back until something must go out, so that it shares a round trip
 * with what follows: its BEGIN, and single-row inserts whose ids are already known (store.ts
 * takes them from an IdReserve). A statement of the store's own goes out in the same batch
 * (`run()`); any other statement on the client takes what is held along in its own write and round
 * trip (or, where it cannot, behind a batch queued just ahead of it); COMMIT takes the rest along
 * (`commit()`), so a transaction that only submits is one round trip. A transaction that runs no
 * statement never begins at all.
 */
export class DeferredStatements {
  #sent = false;
  #held: BatchStep[] = [];

  constructor(
    private readonly client: ClientBase,
    private readonly query: ClientBase['query'],
    private readonly steps: TransactionSteps,
  ) {
    const send = (...args: unknown[]): unknown => {
      const query = this.query as (...a: unknown[]) => unknown;
      if (this.#sent && this.#held.length === 0) return query.apply(client, args);
      const batch = new Batch(this.#takeAll());
      // Where it can, the caller's statement goes out in the same write as what was held: one
      // round trip for both.
      const riding = queryBehind(client, batch, args);
      if (riding !== null) {
        query.call(client, riding.submittable);
        return riding.result;
      }
      // Otherwise the batch is queued just ahead of it: should it fail, that statement fails too,
      // and so does the transaction.
      query.call(client, batch);
      const result = query.apply(client, args);
      // A held insert that failed aborted the transaction: the statement behind it then fails
      // with "current transaction is aborted"; report the insert's own error instead.
      if (!(result instanceof Promise)) return result;
      return result.catch(async (err: unknown) => {
        throw (await batch.done).error ?? err;
      });
    };
    // An own property over pg's prototype method, for the transaction's duration (see restore).
    client.query = send as ClientBase['query'];
  }

  /**
   * Sends `step` now, with what is held (BEGIN included while it is) ahead of it in the same batch:
   * one round trip. Resolves with its rows; rejects with the first failure, a held statement's or
   * its own (TransactionRolledBackError when the transaction had already failed).
   */
  async run(step: BatchStep): Promise<readonly Record<string, string | null>[]> {
    const steps = [...this.#takeAll(), { ...step, rows: true }];
    const { stepRows, error } = await runBatch(this.client, steps);
    if (error) throw rolledBackIfAborted(error);
    return stepRows[steps.length - 1] ?? [];
  }

  /** Holds `step` (a statement that returns nothing the caller waits for) until something goes out. */
  hold(step: BatchStep): void {
    this.#held.push(step);
  }

  /**
   * Commits what went out and what is held, with `after` run once it has committed, in one round
   * trip. When nothing went out yet and nothing is to follow, the held statements go alone, without
   * BEGIN and COMMIT: up to its Sync, a batch is one implicit transaction, all or nothing, committed
   * as any other, and inserts alone need no isolation level (two statements fewer for the server).
   * Call only when `pending`.
   */
  async commit(after: AfterCommit | undefined): Promise<CommitOutcome> {
    if (this.#sent || after !== undefined)
      return commit(this.client, after, this.#takeAll(), this.steps.commit);
    const held = this.#held;
    this.#sent = true;
    this.#held = [];
    const { error } = await runBatch(this.client, held);
    if (error) throw error;
    return { afterError: null, rows: [] };
  }

  /** Whether there is a transaction to commit or roll back: BEGIN went out, or statements wait. */
  get pending(): boolean {
    return this.#sent || this.#held.length > 0;
  }

  /** Drops what is held (the transaction is rolled back); true when BEGIN had gone out. */
  discard(): boolean {
    this.#held = [];
    return this.#sent;
  }

  /** Runs `text` on pg's own query method, sending nothing held ahead of it. */
  unpatched(text: string): Promise<unknown> {
    return (this.query as (text: string) => Promise<unknown>).call(this.client, text);
  }

  /** Gives the client its own query method back. */
  restore(): void {
    delete (this.client as Partial<Pick<ClientBase, 'query'>>).query;
  }

  /** BEGIN unless it went out, then what is held; from now on all of it counts as sent. */
  #takeAll(): BatchStep[] {
    const steps = this.#sent ? this.#held : [this.steps.begin, ...this.#held];
    this.#sent = true;
    this.#held = [];
    return steps;
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
  const deferred = new DeferredStatements(client, client.query, transactionSteps(pool));
  try {
    companion?.opened(client, deferred);
    let result: T;
    try {
      result = await fn(client);
    } catch (err) {
      // What is still held never went out: dropped. ROLLBACK (on pg's own method: nothing to
      // flush ahead of it) only when BEGIN did.
      if (deferred.discard()) {
        await deferred.unpatched('ROLLBACK').catch((rollbackError: unknown) => {
          broken ??= asError(rollbackError);
        });
      }
      throw err;
    }
    // Nothing ran or was held: nothing to commit (and nothing to announce or claim).
    outcome = deferred.pending
      ? await deferred.commit(companion?.withCommit(client))
      : { afterError: null, rows: [] };
    return result;
  } catch (err) {
    // A failure of BEGIN or COMMIT leaves the session in an unknown state: do not reuse it.
    if (transactionStatus(client) !== 'I') broken ??= asError(err);
    throw err;
  } finally {
    deferred.restore();
    companion?.ended(client, outcome);
    // A broken client is destroyed on release, and the server's last words (a FATAL as it shuts
    // down) can still arrive after that: the listener stays with it, or they would crash the process.
    if (broken === undefined) client.removeListener('error', onError);
    client.release(broken);
  }
}

/**
 * The session's transaction status from its last ReadyForQuery ('I' idle), or null where the
 * installed pg does not say (getTransactionStatus is newer than the oldest pg this store runs on).
 */
export function transactionStatus(client: ClientBase): string | null {
  const read = (client as Partial<Pick<ClientBase, 'getTransactionStatus'>>).getTransactionStatus;
  return typeof read === 'function' ? String(read.call(client)) : null;
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
