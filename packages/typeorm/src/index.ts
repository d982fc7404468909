import type { SqlExecutor, TransactionOpener } from '@asynccmd/core';
import { rowsOfResult, TransactionExecutors } from '@asynccmd/core';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';

const executors = new TransactionExecutors<QueryRunner>(async (runner, strings, values) => {
  // The driver's own placeholders: $n on PostgreSQL, ? on MySQL, MariaDB and SQLite.
  const numbered = runner.connection.driver.options.type === 'postgres';
  const text = strings.reduce((all, s, i) => `${all}${numbered ? `$${i}` : '?'}${s}`);
  // On PostgreSQL an UPDATE's answer is `[rows, affected]` (its RETURNING rows first).
  return rowsOfResult(await runner.query(text, [...values]));
});

/**
 * The SqlExecutor over a TypeORM transaction, for `client.submit(typeormTx(em), type, payload)`
 * with the EntityManager that `dataSource.transaction` hands you (or a QueryRunner in a transaction
 * you started): the command is written through its `query`, so it commits or rolls back with the
 * rest. Inside `asyncTransaction` the IMMEDIATE commands start at commit; in a transaction of your
 * own, call `client.afterCommit(ids)` once it has committed.
 */
export function typeormTx(transaction: EntityManager | QueryRunner): SqlExecutor {
  return executors.of(queryRunnerOf(transaction));
}

/**
 * `dataSource.transaction(fn)`, after whose COMMIT the commands submitted with `typeormTx(em)` in it
 * are dispatched (IMMEDIATE ones at once, the rest by waking the pollers), as `client.transaction`
 * does.
 */
export function asyncTransaction<T>(
  dataSource: DataSource,
  fn: (em: EntityManager) => Promise<T>,
): Promise<T> {
  return executors.runWithCommitHooks((register) =>
    dataSource.transaction(async (em) => {
      register(queryRunnerOf(em));
      return fn(em);
    }),
  );
}

function queryRunnerOf(transaction: EntityManager | QueryRunner): QueryRunner {
  const runner = 'manager' in transaction ? transaction : transaction.queryRunner;
  if (runner === undefined || !runner.isTransactionActive) {
    throw new TypeError('typeormTx needs the EntityManager or QueryRunner of an open transaction');
  }
  return runner;
}

/**
 * The opener a transactional executor declares (`transactional: typeormTransactions(dataSource)`)
 * to run each attempt in a `dataSource.transaction` on the store's database: `ctx.tx` is its
 * EntityManager, and the executor's writes through it, its `ctx.submit`s and the command's fenced
 * SUCCESS commit together. PostgreSQL and MySQL/MariaDB (not SQLite, where the store completes
 * only in a transaction of its own).
 */
export function typeormTransactions(dataSource: DataSource): TransactionOpener<EntityManager> {
  return {
    kind: 'transaction-opener',
    transaction: (fn) => asyncTransaction(dataSource, (em) => fn(em, typeormTx(em))),
  };
}
