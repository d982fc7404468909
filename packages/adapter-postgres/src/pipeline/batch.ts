import type { Connection, Submittable } from 'pg';
import { serialize } from 'pg-protocol';

/** One statement of a batch: values bound as text; with a `name`, prepared once per connection. */
export interface BatchStep {
  readonly text: string;
  readonly values?: readonly (string | null)[];
  readonly name?: string;
  /** Its rows come back (the last such step's). */
  readonly rows?: boolean;
}

/** What the server answered, up to the first error. */
export interface BatchAnswer {
  /** Command tags of the steps that completed, in order. */
  readonly tags: readonly string[];
  readonly rows: readonly Record<string, string | null>[];
  /** The rows of each step, by its index (empty for a step that returns none). */
  readonly stepRows: readonly (readonly Record<string, string | null>[])[];
  /** The first failure (the server skipped the rest), or the connection's loss. */
  readonly error: Error | null;
}

/**
 * Several statements in one write and one round trip: extended protocol, one Sync at the end, so
 * pg's client sees a single query. Each statement runs as it would alone (a COMMIT commits at
 * once; statements outside a transaction block share one implicit transaction up to the Sync).
 * It never rejects: the caller reads the tags to tell which statements took effect.
 */
export class Batch implements Submittable {
  readonly done: Promise<BatchAnswer>;
  readonly #tags: string[] = [];
  #fields: string[] = [];
  readonly #rows: Record<string, string | null>[] = [];
  readonly #stepRows: Record<string, string | null>[][];
  #settle!: (answer: BatchAnswer) => void;
  /** Named statements this batch parses: recorded as prepared once it all went well. */
  readonly #preparing: { connection: Connection; name: string; text: string }[] = [];
  #ended = false;

  constructor(private readonly steps: readonly BatchStep[]) {
    this.done = new Promise((resolve) => (this.#settle = resolve));
    this.#stepRows = steps.map(() => []);
  }

  submit(connection: Connection): void {
    // One write of one buffer: what pg's own methods would send as a dozen small writes.
    // A connection that can no longer write drops it, as pg's own sends do; its error ends the batch.
    if (connection.stream.writable) connection.stream.write(this.encode(connection, true));
  }

  /** The batch's messages, ending with a Sync or not (then what follows in the write ends it). */
  encode(connection: Connection, sync: boolean): Buffer {
    const messages: Buffer[] = [];
    for (const step of this.steps) this.#encode(connection, step, messages);
    if (sync) messages.push(SYNC);
    return Buffer.concat(messages);
  }

  /** How many statements it runs: one CommandComplete each when all goes well. */
  get size(): number {
    return this.steps.length;
  }

  handleCommandComplete(msg: { text?: string }): void {
    this.#tags.push(msg.text ?? '');
  }

  handleRowDescription(msg: { fields: readonly { name: string }[] }): void {
    this.#fields = msg.fields.map((f) => f.name);
    this.#rows.length = 0;
  }

  handleDataRow(msg: { fields: readonly (string | null)[] }): void {
    const row: Record<string, string | null> = {};
    this.#fields.forEach((name, i) => (row[name] = msg.fields[i] ?? null));
    this.#rows.push(row);
    // Rows come before their step's CommandComplete: they belong to the first step not yet complete.
    this.#stepRows[this.#tags.length]?.push(row);
  }

  /** An error answer (the client then drops this query and ignores its ReadyForQuery) or the connection lost. */
  handleError(err: Error): void {
    this.#end(err);
  }

  /** The end of its round trip, or (ahead of another query) its last statement complete. */
  handleReadyForQuery(): void {
    this.#end(null);
  }

  // Nothing here copies or suspends a portal; these exist because the client may call them.
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyInResponse(): void {}
  handleCopyData(): void {}

  #encode(connection: Connection, step: BatchStep, messages: Buffer[]): void {
    const { name = '', text, values = [] } = step;
    const prepared = preparedStatements(connection);
    if (name === '') messages.push(serialize.parse({ name, text, types: [] }));
    else if (prepared[name] !== text) {
      // Closing first makes the Parse safe even if an earlier batch created it and then failed.
      messages.push(serialize.close({ type: 'S', name }), serialize.parse({ name, text, types: [] }));
      this.#preparing.push({ connection, name, text });
    }
    messages.push(serialize.bind({ statement: name, values: [...values] }));
    if (step.rows) messages.push(serialize.describe({ type: 'P', name: '' }));
    messages.push(EXECUTE_ALL);
  }

  #end(error: Error | null): void {
    if (this.#ended) return;
    this.#ended = true;
    if (error === null) {
      for (const { connection, name, text } of this.#preparing) preparedStatements(connection)[name] = text;
    }
    this.#settle({ tags: this.#tags, rows: this.#rows, stepRows: this.#stepRows, error });
  }
}

const SYNC = serialize.sync();
/** Execute of the unnamed portal, all rows. */
const EXECUTE_ALL = serialize.execute({});

/**
 * pg's own record of the statements prepared on a connection (what its Query consults before
 * parsing a named statement again), kept up to date so both paths agree. Batches use names of
 * their own, never ones pg's queries use, so a batch that failed after a Parse cannot make pg's
 * next Parse of a shared name collide.
 */
function preparedStatements(connection: Connection): Record<string, string | undefined> {
  const c = connection as Connection & { parsedStatements?: Record<string, string | undefined> };
  c.parsedStatements ??= {};
  return c.parsedStatements;
}
