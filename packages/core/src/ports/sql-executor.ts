/**
 * A transaction asynccmd holds no driver client for (an ORM's), reached through the SQL it can run.
 * An ORM integration builds one over its transaction's public raw-SQL call; the stores then submit
 * in that transaction with plain statements, so the commands commit or roll back with it.
 *
 * `kind` tells it apart from a driver's client where a store accepts either.
 */
export interface SqlExecutor {
  readonly kind: 'sql-executor';
  /**
   * Runs one statement in the transaction: `strings` interleaved with `values` bound as parameters,
   * as a tagged template would (`strings.length === values.length + 1`). Values are strings,
   * numbers or null. Resolves to the rows of a statement that returns rows (column names as
   * written in the statement); what it resolves to for other statements is not read.
   */
  run(strings: readonly string[], values: readonly SqlValue[]): Promise<readonly Record<string, unknown>[]>;
  /**
   * Optional: calls `listener` once after the transaction commits, never when it rolls back. With it,
   * the runtime dispatches the IMMEDIATE commands submitted through this executor at commit, as it
   * does for `client.transaction`; without it, call `client.afterCommit(ids)` after the commit.
   */
  onCommit?(listener: () => void): void;
}

export type SqlValue = string | number | null;

/** Whether `tx` is an SqlExecutor rather than a driver's client. */
export function isSqlExecutor(tx: unknown): tx is SqlExecutor {
  return (
    typeof tx === 'object' &&
    tx !== null &&
    (tx as { kind?: unknown }).kind === 'sql-executor' &&
    typeof (tx as { run?: unknown }).run === 'function'
  );
}

/**
 * A statement written with numbered placeholders (`$1`, `$2`, …, as PostgreSQL's) or `?` (as
 * MySQL's and SQLite's) and its parameters, as the `strings` and `values` of SqlExecutor.run.
 */
export function sqlTemplate(
  text: string,
  params: readonly SqlValue[],
  placeholders: 'numbered' | 'question-mark',
): { strings: string[]; values: SqlValue[] } {
  const pattern = placeholders === 'numbered' ? /\$(\d+)/g : /\?/g;
  const strings: string[] = [];
  const values: SqlValue[] = [];
  let last = 0;
  let next = 0;
  for (const match of text.matchAll(pattern)) {
    strings.push(text.slice(last, match.index));
    const index = placeholders === 'numbered' ? Number(match[1]) - 1 : next++;
    if (index < 0 || index >= params.length) throw new RangeError(`no parameter for ${match[0]}`);
    values.push(params[index] ?? null);
    last = match.index + match[0].length;
  }
  strings.push(text.slice(last));
  return { strings, values };
}

/** How an ORM integration runs one statement on its transaction `tx`. */
export type RunOnTransaction<T> = (
  tx: T,
  strings: readonly string[],
  values: readonly SqlValue[],
) => Promise<readonly Record<string, unknown>[]>;

/**
 * The SqlExecutors of one ORM integration, one per transaction, so the runtime hears of a
 * transaction's commit once however many commands it submits.
 */
export class TransactionExecutors<T extends object> {
  readonly #executors = new WeakMap<T, SqlExecutor>();

  constructor(private readonly runOn: RunOnTransaction<T>) {}

  /** The executor of `tx`; without commit hooks unless `tx` was opened by `runWithCommitHooks`. */
  of(tx: T): SqlExecutor {
    return this.#executors.get(tx) ?? this.#create(tx, undefined);
  }

  /**
   * Runs the ORM's transaction; the transaction it hands over is registered (`register(tx)`) with
   * an executor whose commit listeners run once the transaction has resolved — after COMMIT, and
   * never when it rejected (rolled back).
   */
  async runWithCommitHooks<R>(transaction: (register: (tx: T) => void) => Promise<R>): Promise<R> {
    const committed: (() => void)[] = [];
    const result = await transaction((tx) => {
      this.#create(tx, (listener) => void committed.push(listener));
    });
    for (const listener of committed) listener();
    return result;
  }

  #create(tx: T, onCommit: ((listener: () => void) => void) | undefined): SqlExecutor {
    const executor: SqlExecutor = {
      kind: 'sql-executor',
      run: (strings, values) => this.runOn(tx, strings, values),
      ...(onCommit === undefined ? {} : { onCommit }),
    };
    this.#executors.set(tx, executor);
    return executor;
  }
}

/** `strings` as the first argument of a tagged template (an ORM's `sql` tag). */
export function templateStrings(strings: readonly string[]): TemplateStringsArray {
  return Object.assign([...strings], { raw: [...strings] }) as TemplateStringsArray;
}

/**
 * The rows of a raw query's result, whichever driver produced it: node-postgres `{ rows }`, mysql2
 * `[rows, fields]` (`[header, undefined]` for a write), or the rows themselves (better-sqlite3,
 * postgres.js).
 */
export function rowsOfResult(result: unknown): readonly Record<string, unknown>[] {
  if (Array.isArray(result)) {
    const first: unknown = result[0];
    if (Array.isArray(first)) return first as Record<string, unknown>[];
    return result.length === 2 && result[1] === undefined ? [] : (result as Record<string, unknown>[]);
  }
  const rows = (result as { rows?: unknown } | null)?.rows;
  return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : [];
}

/**
 * How a transactional executor's attempt opens its transaction through an ORM instead of the
 * store's driver: `transaction(fn)` runs `fn` in a new transaction of the ORM's (commits when `fn`
 * resolves, rolls back when it rejects), handing it the ORM's transaction object (what the
 * executor gets as `ctx.tx`) and the SqlExecutor over it (what the runtime submits and writes the
 * fenced SUCCESS through). Each ORM bridge exports one (`knexTransactions(knex)`, …).
 */
export interface TransactionOpener<T> {
  readonly kind: 'transaction-opener';
  transaction<R>(fn: (tx: T, executor: SqlExecutor) => Promise<R>): Promise<R>;
}

/** Whether `value` is a TransactionOpener. */
export function isTransactionOpener(value: unknown): value is TransactionOpener<unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { kind?: unknown }).kind === 'transaction-opener' &&
    typeof (value as { transaction?: unknown }).transaction === 'function'
  );
}
