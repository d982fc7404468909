/**
 * What keeps the database from cleaning up the row versions that finished and updated commands
 * leave behind (PostgreSQL's xmin horizon, InnoDB's purge). While something holds it back — a
 * long transaction or snapshot of another session (an analytics query), a forgotten prepared
 * transaction, a replication slot — dead rows pile up in the command table and claims slow down:
 * an operator should hear of it before the backlog grows.
 */
export type CleanupHolderKind = 'transaction' | 'prepared-transaction' | 'replication-slot';

export interface CleanupHolder {
  readonly kind: CleanupHolderKind;
  /** How long it has held cleanup back, on the database clock; null where the database cannot say. */
  readonly heldForMs: number | null;
  /**
   * Who it is, in the database's words (a session's process id, application name, client address
   * and state; a slot's or prepared transaction's name): for operators and the log, never public.
   */
  readonly description: string;
}

export interface CleanupHorizon {
  /** What has held cleanup back the longest (this probe's own session aside); null when nothing does. */
  readonly oldest: CleanupHolder | null;
  /**
   * Row versions not cleaned up yet: on PostgreSQL the command table's dead tuples, on
   * MySQL/MariaDB InnoDB's history list length (the whole server's); null when unknown.
   */
  readonly deadRows: number | null;
  /** When the command table was last vacuumed (PostgreSQL); null when never, or not a notion there. */
  readonly lastCleanupAt: Date | null;
}

/** Where the database can tell (PostgreSQL, MySQL/MariaDB): a store's `cleanupHorizon`. */
export interface CleanupHorizonProbe {
  /** Reads it; rejects when the database cannot be read or will not say (a missing privilege). */
  read(): Promise<CleanupHorizon>;
}
