import type { Logger } from '@asynccmd/core';
import type { Pool, PoolClient, QueryResultRow } from 'pg';
import type { BatchStep } from './batch.js';
import { runBatch } from './commit.js';
import { asText } from '../connection.js';

export { arrayLiteral, asText } from '../connection.js';

/** A hot-path statement: prepared under `name`, its values as pg binds them (arrays included). */
export interface HotStatement {
  readonly name: string;
  readonly text: string;
  readonly values: readonly unknown[];
}

interface Waiting {
  readonly statement: HotStatement;
  readonly resolve: (rows: QueryResultRow[]) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * How hot-path statements travel through a transaction pooler (PgBouncer `pool_mode = transaction`),
 * where a server connection is the client's only for one transaction: every statement unnamed
 * (a prepared one would be missing on the next server connection), always in a batch, and `prefix`
 * first in the batch's implicit transaction — the settings a direct connection gets at start-up,
 * for this transaction only (`set_config(…, true)`).
 */
export interface PooledHotPath {
  readonly prefix: readonly BatchStep[];
}

/** The hot path's fast commit, for the one transaction it begins (PooledHotPath's prefix). */
export const FAST_COMMIT_STEP: BatchStep = {
  text: `SELECT set_config('synchronous_commit', 'off', true)`,
};

/**
 * The store's hot-path statements (claims, completions, failures, releases, heartbeats) asked for in one
 * turn of the event loop go out together: one batch on one pooled connection, one round trip, one
 * commit. Under load a runtime asks for the next claim in the same turn as the completion of the
 * last batch; sent apart they keep two backends busy per process and cost two wake-ups, which a
 * CPU-bound machine pays for (measured, 2 cores, 4 processes draining: 120–150 → 73–98 µs of CPU
 * per command, 0.74–0.87× → 1.07–1.13× a bare claim/complete loop). A lone statement goes out
 * alone, as pg's own prepared statement (through a transaction pooler: as a batch of its own).
 *
 * Statements of a batch share its implicit transaction, so one failing would undo the others: when
 * a batch fails, each of its statements runs again alone and answers for itself.
 */
export class HotStatements {
  #waiting: Waiting[] = [];
  #scheduled = false;

  constructor(
    private readonly pool: Pool,
    /** Runs one statement alone (pg's own prepared-statement path). */
    private readonly alone: (statement: HotStatement) => Promise<QueryResultRow[]>,
    private readonly logger: Logger,
    /** Null on direct connections. */
    private readonly pooled: PooledHotPath | null = null,
  ) {}

  run<R extends QueryResultRow>(statement: HotStatement): Promise<R[]> {
    return new Promise<R[]>((resolve, reject) => {
      this.#waiting.push({ statement, resolve: resolve as (rows: QueryResultRow[]) => void, reject });
      if (this.#scheduled) return;
      this.#scheduled = true;
      // After this turn's I/O callbacks and microtasks: what else this turn asks for joins in.
      setImmediate(() => {
        this.#scheduled = false;
        const waiting = this.#waiting;
        this.#waiting = [];
        void this.#send(waiting);
      });
    });
  }

  async #send(waiting: readonly Waiting[]): Promise<void> {
    if (waiting.length === 1) return this.#sendAlone(waiting[0]!);
    const error = await this.#sendBatch(waiting);
    if (error === null) return;
    this.logger.debug({ err: error }, 'asynccmd: batched hot-path statements failed; running them alone');
    for (const w of waiting) void this.#sendAlone(w);
  }

  /** Sends `waiting` as one batch and answers them; on a failure, answers none and returns it. */
  async #sendBatch(waiting: readonly Waiting[]): Promise<Error | null> {
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      for (const w of waiting) w.reject(error);
      return null;
    }
    // pg emits 'error' on a checked-out client whose connection dies; unheard, it would crash.
    let broken: Error | undefined;
    const onError = (err: Error): void => {
      broken = err;
    };
    client.on('error', onError);
    const prefix = this.pooled?.prefix ?? [];
    const named = this.pooled === null;
    try {
      const { stepRows, error } = await runBatch(client, [
        ...prefix,
        ...waiting.map((w) => batchStep(w.statement, named)),
      ]);
      if (error === null) {
        waiting.forEach((w, i) => w.resolve([...(stepRows[prefix.length + i] ?? [])]));
        return null;
      }
      // A statement error (it has a SQLSTATE) leaves the connection usable; anything else does not.
      if ((error as { code?: unknown }).code === undefined) broken ??= error;
      return error;
    } finally {
      // A broken client is destroyed on release; what its server still sends must be heard.
      if (broken === undefined) client.removeListener('error', onError);
      client.release(broken);
    }
  }

  async #sendAlone(w: Waiting): Promise<void> {
    if (this.pooled !== null) {
      const error = await this.#sendBatch([w]);
      if (error !== null) w.reject(error);
      return;
    }
    try {
      w.resolve(await this.alone(w.statement));
    } catch (error) {
      w.reject(error);
    }
  }
}

/** The statement as a batch sends it: every value as text (arrays as array literals). */
function batchStep(statement: HotStatement, named: boolean): BatchStep {
  const values = statement.values.map(asText);
  return named
    ? { name: `${statement.name}_b`, text: statement.text, values, rows: true }
    : { text: statement.text, values, rows: true };
}
