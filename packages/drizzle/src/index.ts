import type { SqlExecutor, TransactionOpener } from '@asynccmd/core';
import { rowsOfResult, templateStrings, TransactionExecutors } from '@asynccmd/core';
import { sql } from 'drizzle-orm';
import type { SQL } from 'drizzle-orm';

/**
 * What asynccmd uses of a Drizzle transaction: its public `execute` of an `sql` template. Every
 * Drizzle transaction on PostgreSQL (node-postgres, postgres.js) and MySQL (mysql2) has it.
 */
export interface DrizzleTransaction {
  execute(query: SQL): PromiseLike<unknown>;
}

const executors = new TransactionExecutors<DrizzleTransaction>(async (tx, strings, values) =>
  rowsOfResult(await tx.execute(sql(templateStrings(strings), ...values))),
);

/**
 * The SqlExecutor over a Drizzle transaction, for `client.submit(drizzleTx(tx), type, payload)`:
 * the command is written through `tx.execute(sql…)`, so it commits or rolls back with the rest of
 * `tx`. Inside `asyncTransaction` the IMMEDIATE commands start at commit; in a transaction of your
 * own, call `client.afterCommit(ids)` once it has committed.
 */
export function drizzleTx(tx: DrizzleTransaction): SqlExecutor {
  return executors.of(tx);
}

/**
 * `db.transaction(fn)`, after whose COMMIT the commands submitted with `drizzleTx(tx)` in it are
 * dispatched (IMMEDIATE ones at once, the rest by waking the pollers), as `client.transaction` does.
 */
export function asyncTransaction<Tx extends DrizzleTransaction, T>(
  db: { transaction<R>(fn: (tx: Tx) => Promise<R>): Promise<R> },
  fn: (tx: Tx) => Promise<T>,
): Promise<T> {
  return executors.runWithCommitHooks((register) =>
    db.transaction(async (tx) => {
      register(tx);
      return fn(tx);
    }),
  );
}

/**
 * The opener a transactional executor declares (`transactional: drizzleTransactions(db)`) to run
 * each attempt in a `db.transaction` on the store's database: `ctx.tx` is the Drizzle `tx`, and
 * the executor's writes through it, its `ctx.submit`s and the command's fenced SUCCESS commit
 * together. PostgreSQL and MySQL/MariaDB (Drizzle's SQLite transactions are synchronous).
 */
export function drizzleTransactions<Tx extends DrizzleTransaction>(db: {
  transaction<R>(fn: (tx: Tx) => Promise<R>): Promise<R>;
}): TransactionOpener<Tx> {
  return {
    kind: 'transaction-opener',
    transaction: (fn) => asyncTransaction(db, (tx) => fn(tx, executors.of(tx))),
  };
}
