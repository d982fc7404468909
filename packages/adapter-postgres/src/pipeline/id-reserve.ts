import type { Logger } from '@asynccmd/core';
import type { Pool } from 'pg';
import { compareIds } from '@asynccmd/core/store-kit';

/**
 * Command ids taken ahead from the table's identity sequence. A single-row submit in a store
 * transaction takes its id from here, so it needs no round trip to learn it and its INSERT can wait
 * for the transaction's next statement or its COMMIT (see DeferredStatements). Ids are taken in
 * blocks, in the background, on the store's pool; an empty reserve (the first submits, or a burst
 * outrunning the refill) only means those submits insert at once, as without it. Ids left unused
 * when the process ends are gaps in the sequence, like those of rolled-back inserts.
 */
export class IdReserve {
  #ids: string[] = [];
  #next = 0;
  #refilling: Promise<void> | null = null;
  #closed = false;

  constructor(
    private readonly pool: Pool,
    /** `SELECT nextval(…) AS id FROM generate_series(1, $2)` for the table `$1` (sql.ts). */
    private readonly statement: string,
    private readonly table: string,
    private readonly blockSize: number,
    private readonly logger: Logger,
  ) {}

  /** An id no one else will get, or null when none is at hand (a refill is then on its way). */
  take(): string | null {
    const id = this.#next < this.#ids.length ? this.#ids[this.#next++]! : null;
    if (this.#ids.length - this.#next <= this.blockSize / 2) this.#refill();
    return id;
  }

  /** No more refills; resolves once the one under way is over. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#refilling;
  }

  #refill(): void {
    if (this.#refilling !== null || this.#closed) return;
    this.#refilling = this.pool
      .query<{ id: string }>(this.statement, [this.table, this.blockSize])
      .then(
        ({ rows }) => {
          // Ascending, so commands submitted later get larger ids, as with the sequence itself.
          this.#ids = [...this.#ids.slice(this.#next), ...rows.map((r) => r.id).sort(compareIds)];
          this.#next = 0;
        },
        (err: unknown) => {
          // Harmless: submits insert at once until a later refill succeeds.
          this.logger.warn({ err }, 'asynccmd: taking command ids ahead failed');
        },
      )
      .finally(() => {
        this.#refilling = null;
      });
  }
}
