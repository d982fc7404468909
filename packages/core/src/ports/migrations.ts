/**
 * The DDL `migrate()` runs, as data, so an operator can review it and a DBA apply it by hand
 * (`asynccmd migrate --print-sql`). Run in order — `setup`, then each version's statements — it
 * leaves the schema `migrate()` would, the applied versions recorded, so `migrate()` finds nothing
 * left to do.
 */
export interface MigrationScript {
  /** First: the table that records the applied versions (and, where there is one, the schema). */
  readonly setup: readonly string[];
  /** The versions to apply, oldest first. */
  readonly versions: readonly MigrationStep[];
  /**
   * Whether the whole script may run in one transaction (PostgreSQL, SQLite); false where every DDL
   * statement commits on its own (MySQL / MariaDB).
   */
  readonly transactional: boolean;
  /**
   * Last, after the script's transaction, each on its own outside any transaction block: data that
   * a version moves, in batches that each commit, so no lock is held for longer than one batch
   * (PostgreSQL's finished commands moving to the history table). Run again, they find nothing to
   * do. Absent where there is none.
   */
  readonly afterCommit?: readonly string[];
}

export interface MigrationStep {
  readonly version: number;
  readonly name: string;
  /** The version's DDL, then the INSERT that records it as applied. */
  readonly statements: readonly string[];
}

export interface MigrationScriptOptions {
  /** Every version, as for an empty database; default: only those the database has not applied. */
  readonly all?: boolean;
}
