import type { SqlExecutor, SqlValue } from '@asynccmd/core';
import { sql } from 'kysely';
import type { Kysely, Transaction } from 'kysely';

/** The executor of each transaction: one per `trx`, so the runtime hears of its commit once. */
const executors = new WeakMap<Transaction<unknown>, KyselyExecutor>();

/**
 * The SqlExecutor over a Kysely transaction, for `client.submit(kyselyTx(trx), type, payload)`: the
 * command is written with Kysely's `sql` template, run on `trx`, so it commits or rolls back with
 * the rest of `trx`. Inside `asyncTransaction` the IMMEDIATE commands start at commit; in a
 * transaction of your own, call `client.afterCommit(ids)` once it has committed.
 */
export function kyselyTx<DB>(trx: Transaction<DB>): SqlExecutor {
  const key = trx as Transaction<unknown>;
  let executor = executors.get(key);
  if (executor === undefined) {
    executor = new KyselyExecutor(key, null);
    executors.set(key, executor);
  }
  return executor;
}

/**
 * `db.transaction().execute(fn)`, after whose COMMIT the commands submitted with `kyselyTx(trx)` in
 * it are dispatched (IMMEDIATE ones at once, the rest by waking the pollers), as
 * `client.transaction` does.
 */
export async function asyncTransaction<DB, T>(
  db: Kysely<DB>,
  fn: (trx: Transaction<DB>) => Promise<T>,
): Promise<T> {
  const committed: (() => void)[] = [];
  const result = await db.transaction().execute(async (trx) => {
    executors.set(trx as Transaction<unknown>, new KyselyExecutor(trx as Transaction<unknown>, committed));
    return fn(trx);
  });
  for (const listener of committed) listener();
  return result;
}

class KyselyExecutor implements SqlExecutor {
  readonly kind = 'sql-executor';
  readonly onCommit: ((listener: () => void) => void) | undefined;

  constructor(
    private readonly trx: Transaction<unknown>,
    committed: (() => void)[] | null,
  ) {
    this.onCommit = committed === null ? undefined : (listener) => void committed.push(listener);
  }

  async run(
    strings: readonly string[],
    values: readonly SqlValue[],
  ): Promise<readonly Record<string, unknown>[]> {
    const fragments = Object.assign([...strings], { raw: [...strings] }) as TemplateStringsArray;
    const result = await sql<Record<string, unknown>>(fragments, ...values).execute(this.trx);
    return result.rows;
  }
}
