import type { SqlExecutor, SqlValue } from '@asynccmd/core';
import { sql } from 'drizzle-orm';
import type { SQL } from 'drizzle-orm';

/**
 * What asynccmd uses of a Drizzle transaction: its public `execute` of an `sql` template. Every
 * Drizzle transaction on PostgreSQL (node-postgres, postgres.js) and MySQL (mysql2) has it.
 */
export interface DrizzleTransaction {
  execute(query: SQL): PromiseLike<unknown>;
}

/** The executor of each transaction: one per `tx`, so the runtime hears of its commit once. */
const executors = new WeakMap<DrizzleTransaction, DrizzleExecutor>();

/**
 * The SqlExecutor over a Drizzle transaction, for `client.submit(drizzleTx(tx), type, payload)`:
 * the command is written through `tx.execute(sql…)`, so it commits or rolls back with the rest of
 * `tx`. Inside `asyncTransaction` the IMMEDIATE commands start at commit; in a transaction of your
 * own, call `client.afterCommit(ids)` once it has committed.
 */
export function drizzleTx(tx: DrizzleTransaction): SqlExecutor {
  let executor = executors.get(tx);
  if (executor === undefined) {
    executor = new DrizzleExecutor(tx, null);
    executors.set(tx, executor);
  }
  return executor;
}

/**
 * `db.transaction(fn)`, after whose COMMIT the commands submitted with `drizzleTx(tx)` in it are
 * dispatched (IMMEDIATE ones at once, the rest by waking the pollers), as `client.transaction` does.
 */
export async function asyncTransaction<Tx extends DrizzleTransaction, T>(
  db: { transaction<R>(fn: (tx: Tx) => Promise<R>): Promise<R> },
  fn: (tx: Tx) => Promise<T>,
): Promise<T> {
  const committed: (() => void)[] = [];
  const result = await db.transaction(async (tx) => {
    executors.set(tx, new DrizzleExecutor(tx, committed));
    return fn(tx);
  });
  for (const listener of committed) listener();
  return result;
}

class DrizzleExecutor implements SqlExecutor {
  readonly kind = 'sql-executor';
  readonly onCommit: ((listener: () => void) => void) | undefined;

  constructor(
    private readonly tx: DrizzleTransaction,
    committed: (() => void)[] | null,
  ) {
    this.onCommit = committed === null ? undefined : (listener) => void committed.push(listener);
  }

  async run(
    strings: readonly string[],
    values: readonly SqlValue[],
  ): Promise<readonly Record<string, unknown>[]> {
    const fragments = Object.assign([...strings], { raw: [...strings] }) as TemplateStringsArray;
    return rowsOf(await this.tx.execute(sql(fragments, ...values)));
  }
}

/** node-postgres: `{ rows }`; postgres.js: the rows; mysql2: `[rows, fields]`. */
function rowsOf(result: unknown): readonly Record<string, unknown>[] {
  if (Array.isArray(result)) {
    const first: unknown = result[0];
    if (Array.isArray(first)) return first as Record<string, unknown>[];
    return result.length === 2 && result[1] === undefined ? [] : (result as Record<string, unknown>[]);
  }
  const rows = (result as { rows?: unknown } | null)?.rows;
  return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : [];
}
