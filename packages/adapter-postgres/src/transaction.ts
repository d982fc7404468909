import type { ClientBase, Pool, PoolClient } from 'pg';
import { commit, type AfterCommit, type CommitOutcome } from './commit.js';

/** Takes part in the store's own transactions: may add statements sent with their COMMIT. */
export interface CommitCompanion {
  opened(client: ClientBase): void;
  /** What to run right after COMMIT in the same round trip, if anything. */
  withCommit(client: ClientBase): AfterCommit | undefined;
  /** The transaction is over: committed (with what came after), or not (null). */
  ended(client: ClientBase, outcome: CommitOutcome | null): void;
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
  try {
    await client.query('BEGIN ISOLATION LEVEL READ COMMITTED');
    companion?.opened(client);
    let result: T;
    try {
      result = await fn(client);
    } catch (err) {
      await client.query('ROLLBACK').catch((rollbackError: unknown) => {
        broken ??= asError(rollbackError);
      });
      throw err;
    }
    outcome = await commit(client, companion?.withCommit(client));
    return result;
  } catch (err) {
    // A failure of BEGIN or COMMIT leaves the session in an unknown state: do not reuse it.
    if (client.getTransactionStatus() !== 'I') broken ??= asError(err);
    throw err;
  } finally {
    companion?.ended(client, outcome);
    client.removeListener('error', onError);
    client.release(broken);
  }
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
