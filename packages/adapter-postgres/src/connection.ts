import { TransactionRolledBackError } from '@asynccmd/core';

/*
 * What the PostgreSQL engine (store.ts) runs its statements on: a small interface that pg's pools
 * (pg-connection.ts) and PGlite (@asynccmd/adapter-pglite) both provide. The SQL, its values and
 * the decoding of its rows are the engine's; a connection only carries them.
 */

/** One statement's answer: every column as PostgreSQL's text for it (NULL as null). */
export interface TextRows<R> {
  readonly rows: R[];
  /** The rows the statement wrote or returned, as its command tag says. */
  readonly rowCount: number;
}

/** Where statements run: values bound as parameters, rows read back as text. */
export interface PostgresStatements {
  query<R extends object = Record<string, string | null>>(
    text: string,
    values?: readonly unknown[],
  ): Promise<TextRows<R>>;
}

/**
 * A connection to one PostgreSQL database for the engine. Values are what pg binds: text, numbers,
 * booleans, null and one-dimensional arrays of those (`asText` says how each reads as text).
 */
export interface PostgresConnection<Tx> extends PostgresStatements {
  /** How a caller's transaction handle is recognised, and its name in an INVALID_ARGUMENT. */
  readonly transactionHandle: { readonly name: string; is(candidate: object): boolean };
  /**
   * `query` outside any transaction, on the store's own connection(s). With pg, a pool: statements
   * of two calls may run side by side. With one connection (PGlite), they wait for any transaction
   * of that connection to end.
   */
  query<R extends object = Record<string, string | null>>(
    text: string,
    values?: readonly unknown[],
  ): Promise<TextRows<R>>;
  /** Runs `fn` in a READ COMMITTED transaction: commits, or rolls back and rethrows. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * As `transaction`, for a claim that needs one of its own (within a type limit, a key limit, a
   * key's rate): on the hot path's connections where claims commit without waiting for the WAL
   * flush, as a plain claim does; elsewhere the same as `transaction`.
   */
  claimTransaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /** A statement in `tx`, a transaction of the store's own or the caller's. */
  queryIn<R extends object = Record<string, string | null>>(
    tx: Tx,
    text: string,
    values?: readonly unknown[],
  ): Promise<TextRows<R>>;
  /**
   * A statement run often in `tx` (a submit, a completion in the caller's transaction): prepared
   * once per connection where the driver keeps statements. After an earlier statement in `tx`
   * failed, it rejects with TransactionRolledBackError (`rolledBackIfAborted`).
   */
  preparedIn<R>(tx: Tx, text: string, values: readonly unknown[]): Promise<R[]>;
  /** A statement of the hot path (claims, heartbeats, outcomes), outside any transaction. */
  hot<R>(text: string, values: readonly unknown[]): Promise<R[]>;
  /** Whether `error` means a transaction was lost through no fault of its statements. */
  isTransient(error: unknown): boolean;
  /** Ends what the connection opened (never what the application handed it). Idempotent. */
  close(): Promise<void>;
}

/**
 * A claim's statement in a transaction of the store's, prepared where the connection keeps
 * statements (`preparedIn`), answering as `queryIn` does: the keyed and limited claims run the same
 * few statements every round, and planning them each time cost more than running them.
 */
export async function preparedRows<Tx, R>(
  connection: PostgresConnection<Tx>,
  tx: Tx,
  text: string,
  values: readonly unknown[],
): Promise<TextRows<R>> {
  const rows = await connection.preparedIn<R>(tx, text, values);
  return { rows, rowCount: rows.length };
}

/** SQLSTATE 25P02: a statement sent after an error in the transaction, refused. */
const IN_FAILED_TRANSACTION = '25P02';

/**
 * `error`, unless the server refused the statement only because the transaction had already failed
 * (25P02: a statement in it failed and its error was caught): then TransactionRolledBackError, the
 * same answer whether the submit or the COMMIT is the first to hear of it.
 */
export function rolledBackIfAborted(
  error: unknown,
  rolledBack = new TransactionRolledBackError(
    'the transaction had already failed (a statement in it failed and its error was caught): ' +
      'nothing in it, this submit included, will be committed',
  ),
): unknown {
  return (error as { code?: unknown } | null)?.code === IN_FAILED_TRANSACTION ? rolledBack : error;
}

/**
 * SQLSTATEs of a transaction lost through no fault of its statements: class 08 (connection
 * exception), 57P01–57P03 (the server shutting down or starting), 40001/40P01 (chosen as a
 * serialization or deadlock victim).
 */
export function isTransientSqlState(code: unknown): boolean {
  return (
    typeof code === 'string' &&
    (code.startsWith('08') || /^57P0[123]$/.test(code) || code === '40001' || code === '40P01')
  );
}

/** A bound value as text, as PostgreSQL reads it (arrays as array literals), or null. */
export function asText(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (Array.isArray(value)) return arrayLiteral(value);
  if (value instanceof Date) return value.toISOString();
  return String(value);
}

/** A one-dimensional PostgreSQL array literal of text or null elements. */
export function arrayLiteral(items: readonly unknown[]): string {
  const element = (item: unknown): string =>
    item === null || item === undefined ? 'NULL' : `"${String(item).replace(/["\\]/g, '\\$&')}"`;
  return `{${items.map(element).join(',')}}`;
}
