import type { ClientBase, Connection } from 'pg';
import type { Batch } from './batch.js';

type Callback = (err: Error | null, result?: unknown) => void;

/** What of pg's Query this file uses: how it is sent, and the answers pg's client hands it. */
interface PgQuery {
  readonly text?: unknown;
  readonly values?: unknown;
  readonly name?: unknown;
  readonly rows?: unknown;
  callback?: Callback;
  binary?: boolean;
  readonly _result?: unknown;
  requiresPreparation(): boolean;
  submit(connection: Connection): Error | null;
  handleRowDescription(msg: unknown): void;
  handleDataRow(msg: unknown): void;
  handleCommandComplete(msg: unknown, connection: Connection): void;
  handleError(err: Error, connection: Connection): void;
  handleReadyForQuery(connection: Connection): void;
  handleEmptyQuery(connection: Connection): void;
  handlePortalSuspended(connection: Connection): void;
  handleCopyInResponse(connection: Connection): void;
  handleCopyData(msg: unknown, connection: Connection): void;
}

type PgQueryClass = new (...args: unknown[]) => PgQuery;

/**
 * A caller's statement with a batch of the store's ahead of it, in one write and one round trip:
 * the batch's messages without a Sync, then the caller's own (pg's Query, which ends with its Sync).
 * pg's client sees one query. The batch's answers (one CommandComplete per statement) go to the
 * batch, the rest to the caller's query. Should a batch statement fail, the server skips to the
 * Sync: the caller's statement never runs and rejects with that failure.
 */
class QueryBehindBatch {
  #ahead: number;
  /** Set by pg's client when it times the query out; called once the caller's query has answered. */
  callback: Callback | undefined;

  constructor(
    private readonly batch: Batch,
    private readonly query: PgQuery,
  ) {
    this.#ahead = batch.size;
  }

  // pg's client reads these of the query it runs: only unnamed statements ride (see queryBehind).
  get name(): undefined {
    return undefined;
  }
  /** pg's client gives its type parsers to the caller's result through this. */
  get _result(): unknown {
    return this.query._result;
  }
  get binary(): boolean | undefined {
    return this.query.binary;
  }
  set binary(value: boolean | undefined) {
    this.query.binary = value;
  }

  submit(connection: Connection): Error | null {
    const stream = connection.stream as Connection['stream'] & { cork?(): void; uncork?(): void };
    // Corked, the batch and pg's own messages for the caller's statement leave in one write.
    stream.cork?.();
    try {
      if (stream.writable) stream.write(this.batch.encode(connection, false));
      return this.query.submit(connection);
    } finally {
      stream.uncork?.();
    }
  }

  handleRowDescription(msg: { fields: readonly { name: string }[] }): void {
    if (this.#ahead > 0) this.batch.handleRowDescription(msg);
    else this.query.handleRowDescription(msg);
  }

  handleDataRow(msg: { fields: readonly (string | null)[] }): void {
    if (this.#ahead > 0) this.batch.handleDataRow(msg);
    else this.query.handleDataRow(msg);
  }

  handleCommandComplete(msg: { text?: string }, connection: Connection): void {
    if (this.#ahead === 0) return this.query.handleCommandComplete(msg, connection);
    this.batch.handleCommandComplete(msg);
    this.#ahead -= 1;
    if (this.#ahead === 0) this.batch.handleReadyForQuery();
  }

  handleError(err: Error, connection: Connection): void {
    if (this.#ahead > 0) {
      this.#ahead = 0;
      this.batch.handleError(err);
    }
    this.query.handleError(err, connection);
  }

  handleReadyForQuery(connection: Connection): void {
    this.query.handleReadyForQuery(connection);
  }
  handleEmptyQuery(connection: Connection): void {
    this.query.handleEmptyQuery(connection);
  }
  handlePortalSuspended(connection: Connection): void {
    this.query.handlePortalSuspended(connection);
  }
  handleCopyInResponse(connection: Connection): void {
    this.query.handleCopyInResponse(connection);
  }
  handleCopyData(msg: unknown, connection: Connection): void {
    this.query.handleCopyData(msg, connection);
  }
}

/**
 * The caller's statement (`args`, as given to `client.query`) with `batch` ahead of it, ready to
 * hand to pg's query method, and what that call is to return to the caller; null when it cannot
 * ride: pg's Query is not at hand (another client class), or the statement would not go by the
 * extended protocol (a simple query cannot follow a batch without a Sync: after a failure the server
 * would skip it and wait for a Sync that never comes), is named, reads a portal in pages, or is a
 * submittable of its own.
 */
export function queryBehind(
  client: ClientBase,
  batch: Batch,
  args: readonly unknown[],
): { readonly submittable: unknown; readonly result: Promise<unknown> | undefined } | null {
  const first = args[0] as { submit?: unknown } | null | undefined;
  if (first == null || typeof first.submit === 'function') return null;
  const Query = (client.constructor as { Query?: PgQueryClass }).Query;
  if (typeof Query !== 'function') return null;
  const query = new Query(...args);
  const ridable =
    typeof query.text === 'string' &&
    !query.name &&
    !query.rows &&
    (query.values === undefined || Array.isArray(query.values)) &&
    query.requiresPreparation();
  if (!ridable) return null;
  const composite = new QueryBehindBatch(batch, query);
  let answer: Callback | undefined = query.callback;
  let result: Promise<unknown> | undefined;
  if (typeof answer !== 'function') {
    result = new Promise((resolve, reject) => {
      answer = (err, res) => (err ? reject(err) : resolve(res));
    });
  }
  query.callback = (err, res) => {
    answer?.(err, res);
    composite.callback?.(err, res);
  };
  return { submittable: composite, result };
}
