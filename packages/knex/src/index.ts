import type { SqlExecutor } from '@asynccmd/core';
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
