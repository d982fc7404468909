import type { SqlExecutor, TransactionOpener } from '@asynccmd/core';
import { rowsOfResult, TransactionExecutors } from '@asynccmd/core';
import type { Knex } from 'knex';

const executors = new TransactionExecutors<Knex.Transaction>(async (trx, strings, values) => {
  // `?` is Knex's placeholder: one written in the statement itself is escaped.
  const text = strings.map((s) => s.replaceAll('?', '\\?')).join('?');
  return rowsOfResult(await trx.raw(text, [...values]));
});

/**
 * The SqlExecutor over a Knex transaction, for `client.submit(knexTx(trx), type, payload)`: the
 * command is written through `trx.raw`, so it commits or rolls back with the rest of `trx`.
 * Inside `asyncTransaction` the IMMEDIATE commands start at commit; in a transaction of your own,
 * call `client.afterCommit(ids)` once it has committed.
 */
export function knexTx(trx: Knex.Transaction): SqlExecutor {
  return executors.of(trx);
}

/**
 * `knex.transaction(fn)`, after whose COMMIT the commands submitted with `knexTx(trx)` in it are
 * dispatched (IMMEDIATE ones at once, the rest by waking the pollers), as `client.transaction` does.
 */
export function asyncTransaction<T>(
  knex: Knex,
  fn: (trx: Knex.Transaction) => Promise<T>,
  config?: Knex.TransactionConfig,
): Promise<T> {
  return executors.runWithCommitHooks((register) =>
    knex.transaction(async (trx) => {
      register(trx);
      return fn(trx);
    }, config),
  );
}

/**
 * The opener a transactional executor declares (`transactional: knexTransactions(knex)`) to run
 * each attempt in a `knex.transaction` on the store's database: `ctx.tx` is the Knex `trx`, and
 * the executor's writes through it, its `ctx.submit`s and the command's fenced SUCCESS commit
 * together. `knex` must reach the store's database and schema (PostgreSQL, MySQL/MariaDB; not
 * SQLite, where the store completes only on its own handle).
 */
export function knexTransactions(
  knex: Knex,
  config?: Knex.TransactionConfig,
): TransactionOpener<Knex.Transaction> {
  return {
    kind: 'transaction-opener',
    transaction: (fn) => asyncTransaction(knex, (trx) => fn(trx, executors.of(trx)), config),
  };
}
