import { TransactionRolledBackError } from '@asynccmd/core';
import {
  asText,
  isTransientSqlState,
  rolledBackIfAborted,
  type PostgresConnection,
  type TextRows,
} from '@asynccmd/adapter-postgres/engine';
import type { PGliteInterface, QueryOptions, Results, Transaction } from '@electric-sql/pglite';

/** What runs statements: the database itself, or one of its transactions. */
type Statements = Pick<PGliteInterface, 'query' | 'exec'> | Pick<Transaction, 'query' | 'exec'>;

/**
 * The PostgreSQL engine's connection on PGlite: one in-process database, one session. Every
 * statement waits for the one before it; a statement outside a transaction waits for any open
 * transaction to end (PGlite's own rule), so transactions never overlap.
 */
export class PgliteConnection implements PostgresConnection<Transaction> {
  readonly transactionHandle = {
    name: 'a PGlite transaction',
    is: (candidate: object): boolean => {
      const tx = candidate as { query?: unknown; rollback?: unknown };
      return typeof tx.query === 'function' && typeof tx.rollback === 'function';
    },
  };
  /** Rows as text and values as the engine gives them: built once the database is ready (its array types known). */
  private readonly options: Promise<QueryOptions>;
  private closing: Promise<void> | null = null;

  constructor(
    readonly db: PGliteInterface,
    /** Whether close() closes the database (false for one the application passed in). */
    private readonly ownsDb: boolean,
  ) {
    this.options = db.waitReady.then((): QueryOptions => ({
      // Every column as PostgreSQL's text for it, as the engine decodes its rows (pg: RAW_TYPES).
      parsers: identities(db.parsers, (text: string) => text),
      // Values go as the text asText makes of them: PGlite's own serializers would, for one,
      // write a JSON payload's text as a JSON string.
      serializers: identities(db.serializers, (text: string) => text),
    }));
  }

  async query<R extends object>(text: string, values?: readonly unknown[]): Promise<TextRows<R>> {
    return textRows<R>(await this.run(this.db, text, values));
  }

  /** One connection, one kind of transaction. */
  claimTransaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.transaction(fn);
  }

  async transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    try {
      return await this.db.transaction(fn);
    } catch (error) {
      // COMMIT of a transaction a caught error had doomed: rolled back, as pg's store says it.
      throw rolledBackIfAborted(error, new TransactionRolledBackError());
    }
  }

  async queryIn<R extends object>(
    tx: Transaction,
    text: string,
    values?: readonly unknown[],
  ): Promise<TextRows<R>> {
    return textRows<R>(await this.run(tx, text, values));
  }

  async preparedIn<R>(tx: Transaction, text: string, values: readonly unknown[]): Promise<R[]> {
    try {
      return (await this.run(tx, text, values)).rows as R[];
    } catch (error) {
      throw rolledBackIfAborted(error);
    }
  }

  async hot<R>(text: string, values: readonly unknown[]): Promise<R[]> {
    return (await this.run(this.db, text, values)).rows as R[];
  }

  /** One session, in this process: only the server's own SQLSTATEs can say a transaction was lost. */
  isTransient(error: unknown): boolean {
    return isTransientSqlState((error as { code?: unknown } | null)?.code);
  }

  close(): Promise<void> {
    this.closing ??= this.ownsDb && !this.db.closed ? this.db.close() : Promise.resolve();
    return this.closing;
  }

  /** With values, one statement (extended protocol); without, as pg sends it (simple protocol). */
  private async run(on: Statements, text: string, values?: readonly unknown[]): Promise<Results> {
    const options = await this.options;
    if (values === undefined || values.length === 0) {
      const results = await on.exec(text, options);
      return results.at(-1) ?? { rows: [], fields: [] };
    }
    return on.query(text, values.map(asText), options);
  }
}

function textRows<R>(result: Results): TextRows<R> {
  return { rows: result.rows as R[], rowCount: result.rowCount ?? result.affectedRows ?? 0 };
}

/** The same keys as `handlers`, each with `identity`. */
function identities<F>(handlers: object, identity: F): Record<string, F> {
  return Object.fromEntries(Object.keys(handlers).map((key) => [key, identity]));
}
