import type { SqlExecutor, TransactionOpener } from '@asynccmd/core';
import { templateStrings, TransactionExecutors } from '@asynccmd/core';
import { sql } from 'kysely';
import type { Kysely, Transaction } from 'kysely';

const executors = new TransactionExecutors<Transaction<unknown>>(async (trx, strings, values) => {
  const result = await sql<Record<string, unknown>>(templateStrings(strings), ...values).execute(trx);
  return result.rows;
});

/**
 * The SqlExecutor over a Kysely transaction, for `client.submit(kyselyTx(trx), type, payload)`: the
 * command is written with Kysely's `sql` template, run on `trx`, so it commits or rolls back with
 * the rest of `trx`. Inside `asyncTransaction` the IMMEDIATE commands start at commit; in a
 * transaction of your own, call `client.afterCommit(ids)` once it has committed.
 */
export function kyselyTx<DB>(trx: Transaction<DB>): SqlExecutor {
  return executors.of(trx as Transaction<unknown>);
}

/**
 * `db.transaction().execute(fn)`, after whose COMMIT the commands submitted with `kyselyTx(trx)` in
 * it are dispatched (IMMEDIATE ones at once, the rest by waking the pollers), as
 * `client.transaction` does.
 */
export function asyncTransaction<DB, T>(
  db: Kysely<DB>,
  fn: (trx: Transaction<DB>) => Promise<T>,
): Promise<T> {
  return executors.runWithCommitHooks((register) =>
    db.transaction().execute(async (trx) => {
      register(trx as Transaction<unknown>);
      return fn(trx);
    }),
  );
}

/**
 * The opener a transactional executor declares (`transactional: kyselyTransactions(db)`) to run
 * each attempt in a `db.transaction().execute` on the store's database: `ctx.tx` is the Kysely
 * `Transaction`, and the executor's writes through it, its `ctx.submit`s and the command's fenced
 * SUCCESS commit together. PostgreSQL and MySQL/MariaDB (not SQLite, where the store completes only
 * in a transaction of its own).
 */
export function kyselyTransactions<DB>(db: Kysely<DB>): TransactionOpener<Transaction<DB>> {
  return {
    kind: 'transaction-opener',
    transaction: (fn) => asyncTransaction(db, (trx) => fn(trx, kyselyTx(trx))),
  };
}
