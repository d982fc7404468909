import type { MigrationScript } from '../ports/migrations.js';

/*
 * The one migration runner: every adapter's `migrate()` is runMigrations over its statement lists
 * and a small engine (its lock, its versions table, how it runs a statement). The version numbers
 * and the `<table>_migrations` rows are each adapter's own, as they always were, so a database
 * migrated before this runner existed finds its versions applied and runs nothing again.
 */

/** One version of an adapter's schema: its DDL, in the adapter's dialect. */
export interface Migration<Context> {
  readonly version: number;
  readonly name: string;
  /** The DDL for `context` (the table's names; on MySQL also the binary collation the server has). */
  statements(context: Context): readonly string[];
}

/** What the runner needs of a database, on one `Session` (a connection, a handle). */
export interface MigrationEngine<Context, Session, M extends Migration<Context> = Migration<Context>> {
  /**
   * Runs `run` holding the migration lock, so two processes migrating at once take turns; where the
   * database's DDL is transactional, `run` is inside one transaction, committed when it returns.
   */
  withMigrationLock<T>(run: (session: Session) => Promise<T>): Promise<T>;
  /** Creates what records the versions (the versions table; a schema), where missing. */
  setup(session: Session): Promise<void>;
  /** The versions recorded as applied. */
  appliedVersions(session: Session): Promise<ReadonlySet<number>>;
  /** What the statements depend on, read once, when a version is to be applied. */
  context(session: Session): Promise<Context>;
  /** Runs one version's statements in order (inside withMigrationLock's transaction, where there is one). */
  apply(session: Session, statements: readonly string[], migration: M): Promise<void>;
  /** Records `migration` as applied. */
  recordVersion(session: Session, migration: M): Promise<void>;
  /** What runs after the versions, under the same lock, every time (PostgreSQL's payload limit). */
  afterVersions?(session: Session): Promise<void>;
}

/** Applies the versions of `migrations` the database lacks, oldest first; returns those applied. */
export async function runMigrations<Context, Session, M extends Migration<Context>>(
  engine: MigrationEngine<Context, Session, M>,
  migrations: readonly M[],
): Promise<number[]> {
  return engine.withMigrationLock(async (session) => {
    await engine.setup(session);
    const applied = await engine.appliedVersions(session);
    const pending = pendingMigrations(migrations, applied);
    if (pending.length > 0) {
      const context = await engine.context(session);
      for (const m of pending) {
        await engine.apply(session, m.statements(context), m);
        await engine.recordVersion(session, m);
      }
    }
    await engine.afterVersions?.(session);
    return pending.map((m) => m.version);
  });
}

/** Of `migrations`, those not in `applied`, oldest first. */
export function pendingMigrations<M extends { readonly version: number }>(
  migrations: readonly M[],
  applied: ReadonlySet<number>,
): M[] {
  return migrations.filter((m) => !applied.has(m.version)).sort((a, b) => a.version - b.version);
}

/** How an adapter writes its migration script's own statements. */
export interface MigrationScriptText<M> {
  /** The statements that create what records the versions (see MigrationScript.setup). */
  readonly setup: readonly string[];
  /** The INSERT that records `migration`, as literal SQL. */
  recordVersion(migration: M): string;
  /** Whether the script may run in one transaction (see MigrationScript.transactional). */
  readonly transactional: boolean;
  /** Statements the last pending version ends with, before its record (PostgreSQL's payload limit). */
  readonly afterLast?: readonly string[];
}

/** What runMigrations would run on a database that has applied `applied`, as text. */
export function migrationScriptOf<Context, M extends Migration<Context>>(
  migrations: readonly M[],
  applied: ReadonlySet<number>,
  context: Context,
  text: MigrationScriptText<M>,
): MigrationScript {
  const pending = pendingMigrations(migrations, applied);
  return {
    setup: [...text.setup],
    transactional: text.transactional,
    versions: pending.map((m) => ({
      version: m.version,
      name: m.name,
      statements: [
        ...m.statements(context),
        ...(m === pending.at(-1) ? (text.afterLast ?? []) : []),
        text.recordVersion(m),
      ],
    })),
  };
}

/** `text` as an SQL string literal. */
export function sqlStringLiteral(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}
