import type { SqlExecutor, SqlValue } from '@asynccmd/core';
import type { Knex } from 'knex';

/** The executor of each transaction: one per `trx`, so the runtime hears of its commit once. */
const executors = new WeakMap<Knex.Transaction, KnexExecutor>();

/**
 * The SqlExecutor over a Knex transaction, for `client.submit(knexTx(trx), type, payload)`: the
 * command is written through `trx.raw`, so it commits or rolls back with the rest of `trx`.
 * Inside `asyncTransaction` the IMMEDIATE commands start at commit; in a transaction of your own,
 * call `client.afterCommit(ids)` once it has committed.
 */
export function knexTx(trx: Knex.Transaction): SqlExecutor {
  let executor = executors.get(trx);
  if (executor === undefined) {
    executor = new KnexExecutor(trx, null);
    executors.set(trx, executor);
  }
  return executor;
}

/**
 * `knex.transaction(fn)`, after whose COMMIT the commands submitted with `knexTx(trx)` in it are
 * dispatched (IMMEDIATE ones at once, the rest by waking the pollers), as `client.transaction` does.
 */
export async function asyncTransaction<T>(
  knex: Knex,
  fn: (trx: Knex.Transaction) => Promise<T>,
  config?: Knex.TransactionConfig,
): Promise<T> {
  const committed: (() => void)[] = [];
  const result = await knex.transaction(async (trx) => {
    executors.set(trx, new KnexExecutor(trx, committed));
    return fn(trx);
  }, config);
  for (const listener of committed) listener();
  return result;
}

class KnexExecutor implements SqlExecutor {
  readonly kind = 'sql-executor';
  readonly onCommit: ((listener: () => void) => void) | undefined;

  constructor(
    private readonly trx: Knex.Transaction,
    committed: (() => void)[] | null,
  ) {
    this.onCommit = committed === null ? undefined : (listener) => void committed.push(listener);
  }

  async run(
    strings: readonly string[],
    values: readonly SqlValue[],
  ): Promise<readonly Record<string, unknown>[]> {
    // `?` is Knex's placeholder: one written in the statement itself is escaped.
    const text = strings.map((s) => s.replaceAll('?', '\\?')).join('?');
    return rowsOf(await this.trx.raw(text, [...values]));
  }
}

/** The rows of a raw result, whichever driver Knex runs on (pg, mysql2, better-sqlite3). */
function rowsOf(result: unknown): readonly Record<string, unknown>[] {
  if (Array.isArray(result)) {
    // mysql2: [rows, fields]; better-sqlite3: the rows themselves.
    const first: unknown = result[0];
    if (Array.isArray(first)) return first as Record<string, unknown>[];
    return result.length === 2 && !Array.isArray(first) && result[1] === undefined
      ? []
      : (result as Record<string, unknown>[]);
  }
  const rows = (result as { rows?: unknown } | null)?.rows;
  return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : [];
}
