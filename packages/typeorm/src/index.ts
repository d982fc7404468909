import type { SqlExecutor } from '@asynccmd/core';
import { TransactionExecutors } from '@asynccmd/core';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';

const executors = new TransactionExecutors<QueryRunner>(async (runner, strings, values) => {
  // The driver's own placeholders: $n on PostgreSQL, ? on MySQL, MariaDB and SQLite.
  const numbered = runner.connection.driver.options.type === 'postgres';
  const text = strings.reduce((all, s, i) => `${all}${numbered ? `$${i}` : '?'}${s}`);
  const result: unknown = await runner.query(text, [...values]);
  return Array.isArray(result) ? (result as Record<string, unknown>[]) : [];
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
