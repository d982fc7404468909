import type { SqlExecutor, SqlValue } from '@asynccmd/core';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';

/** The executor of each transaction: one per query runner, so the runtime hears of its commit once. */
const executors = new WeakMap<QueryRunner, TypeormExecutor>();

/**
 * The SqlExecutor over a TypeORM transaction, for `client.submit(typeormTx(em), type, payload)`
 * with the EntityManager that `dataSource.transaction` hands you (or a QueryRunner in a transaction
 * you started): the command is written through its `query`, so it commits or rolls back with the
 * rest. Inside `asyncTransaction` the IMMEDIATE commands start at commit; in a transaction of your
 * own, call `client.afterCommit(ids)` once it has committed.
 */
export function typeormTx(transaction: EntityManager | QueryRunner): SqlExecutor {
  const runner = queryRunnerOf(transaction);
  let executor = executors.get(runner);
  if (executor === undefined) {
    executor = new TypeormExecutor(runner, null);
    executors.set(runner, executor);
  }
  return executor;
}

/**
 * `dataSource.transaction(fn)`, after whose COMMIT the commands submitted with `typeormTx(em)` in it
 * are dispatched (IMMEDIATE ones at once, the rest by waking the pollers), as `client.transaction`
 * does.
 */
export async function asyncTransaction<T>(
  dataSource: DataSource,
  fn: (em: EntityManager) => Promise<T>,
): Promise<T> {
  const committed: (() => void)[] = [];
  const result = await dataSource.transaction(async (em) => {
    const runner = queryRunnerOf(em);
    executors.set(runner, new TypeormExecutor(runner, committed));
    return fn(em);
  });
  for (const listener of committed) listener();
  return result;
}

function queryRunnerOf(transaction: EntityManager | QueryRunner): QueryRunner {
  const runner = 'manager' in transaction ? transaction : transaction.queryRunner;
  if (runner === undefined || !runner.isTransactionActive) {
    throw new TypeError('typeormTx needs the EntityManager or QueryRunner of an open transaction');
  }
  return runner;
}

class TypeormExecutor implements SqlExecutor {
  readonly kind = 'sql-executor';
  readonly onCommit: ((listener: () => void) => void) | undefined;

  constructor(
    private readonly runner: QueryRunner,
    committed: (() => void)[] | null,
  ) {
    this.onCommit = committed === null ? undefined : (listener) => void committed.push(listener);
  }

  async run(
    strings: readonly string[],
    values: readonly SqlValue[],
  ): Promise<readonly Record<string, unknown>[]> {
    // The driver's own placeholders: $n on PostgreSQL, ? on MySQL, MariaDB and SQLite.
    const numbered = this.runner.connection.driver.options.type === 'postgres';
    const text = strings.reduce((all, s, i) => `${all}${numbered ? `$${i}` : '?'}${s}`);
    const result: unknown = await this.runner.query(text, [...values]);
    return Array.isArray(result) ? (result as Record<string, unknown>[]) : [];
  }
}
