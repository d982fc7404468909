import type Database from 'better-sqlite3';
import { ACTIVE_STATUSES, DEFAULT_PRIORITY, type MigrationScript } from '@asynccmd/core';
import { migrationScriptOf, sqlStringLiteral } from '@asynccmd/core/store-kit';
import type { Migration, MigrationEngine } from '@asynccmd/core/store-kit';
import { dependenciesDdl, settleTriggersDdl, widenStatusCheck } from './dependencies.js';
import { historyDdl } from './history.js';
import { submitWindowsDdl } from './submit-windows.js';
import { rateLimitsDdl } from './rate-limits.js';
import { keyLimitsDdl, keyRateLimitsDdl } from './key-limits.js';
import { flowKeysDdl } from './flow-keys.js';

/*
 * Versioned schema changes, each a list of DDL statements for the table (core's runMigrations
 * applies them). The version numbers are shared by every adapter (1 = the command table and its
 * indexes), so `<table>_migrations` means the same thing on SQLite, Postgres and MySQL. All the
 * missing versions run in one transaction, so they apply whole or not at all; statements that can
 * say IF NOT EXISTS do anyway.
 */

const ACTIVE = ACTIVE_STATUSES.map((s) => `'${s}'`).join(', ');

/** A version; one that edits the schema's text (writable_schema) runs with SQLite's defensive mode lifted. */
export interface SqliteMigration extends Migration<string> {
  readonly editsSchemaText?: boolean;
}

export const MIGRATIONS: readonly SqliteMigration[] = [
  {
    version: 1,
    name: 'command table and the indexes of its hot paths',
    statements: (t) => [
      // Times are epoch milliseconds. AUTOINCREMENT: ids are never reused, even after a purge, so a
      // list cursor and a client following a command id can never land on a different command.
      `CREATE TABLE IF NOT EXISTS ${t} (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        type         TEXT    NOT NULL,
        biz_key      TEXT,
        payload      TEXT    NOT NULL,
        status       TEXT    NOT NULL DEFAULT 'PENDING'
                     CHECK (status IN ('PENDING', 'RUNNING', 'SUCCESS', 'DEAD', 'CANCELLED')),
        max_retry    INTEGER NOT NULL,
        retry_count  INTEGER NOT NULL DEFAULT 0,
        rescue_count INTEGER NOT NULL DEFAULT 0,
        next_run_at  INTEGER NOT NULL,
        last_error   TEXT,
        owner        TEXT,
        claim_token  TEXT,
        lease_until  INTEGER,
        idempotent   INTEGER NOT NULL DEFAULT 0,
        headers      TEXT    NOT NULL DEFAULT '{}',
        created_at   INTEGER NOT NULL,
        updated_at   INTEGER NOT NULL,
        started_at   INTEGER,
        finished_at  INTEGER
      )`,
      // The due claim walks this in (next_run_at, id) order and stops after LIMIT rows.
      `CREATE INDEX IF NOT EXISTS ${t}_due ON ${t} (next_run_at, id) WHERE status = 'PENDING'`,
      `CREATE INDEX IF NOT EXISTS ${t}_claim_token ON ${t} (claim_token) WHERE claim_token IS NOT NULL`,
      `CREATE INDEX IF NOT EXISTS ${t}_type_biz ON ${t} (type, biz_key)`,
      // At most one unfinished idempotent command per (type, biz_key): the atomic idempotent submit.
      `CREATE UNIQUE INDEX IF NOT EXISTS ${t}_active_key ON ${t} (type, biz_key)
         WHERE idempotent = 1 AND status IN (${ACTIVE})`,
      `CREATE INDEX IF NOT EXISTS ${t}_lease ON ${t} (lease_until, id) WHERE status = 'RUNNING'`,
      `CREATE INDEX IF NOT EXISTS ${t}_finished ON ${t} (finished_at) WHERE finished_at IS NOT NULL`,
      `CREATE INDEX IF NOT EXISTS ${t}_status ON ${t} (status, id)`,
    ],
  },
  {
    version: 2,
    name: 'attempt history and lists by creation time',
    // A version runs in one transaction (runMigrations), so its DDL applies whole or not at all.
    statements: (t) => [
      `ALTER TABLE ${t} ADD COLUMN claimed_by TEXT`,
      `ALTER TABLE ${t} ADD COLUMN retry_count_at_retry INTEGER NOT NULL DEFAULT 0`,
      `ALTER TABLE ${t} ADD COLUMN rescue_count_at_retry INTEGER NOT NULL DEFAULT 0`,
      `ALTER TABLE ${t} ADD COLUMN history TEXT NOT NULL DEFAULT '[]'`,
      // Lists run newest first by (created_at, id), with or without one status.
      `DROP INDEX IF EXISTS ${t}_status`,
      `CREATE INDEX IF NOT EXISTS ${t}_status_created ON ${t} (status, created_at, id)`,
      `CREATE INDEX IF NOT EXISTS ${t}_created ON ${t} (created_at, id)`,
    ],
  },
  {
    version: 3,
    name: 'dead-letter lookup',
    // The health probe's dead-letter count walks the (status, created_at, id) index of version 2;
    // the version is recorded so the numbers mean the same on every adapter.
    statements: () => [],
  },
  {
    version: 4,
    name: 'recent outcomes lookup',
    // Outcome counts read the partial finished_at index of version 1; the version is recorded so
    // the numbers mean the same on every adapter.
    statements: () => [],
  },
  {
    version: 7,
    name: 'recurring schedules and the once-per-tick key',
    statements: (t) => [
      // (schedule_name, schedule_tick) is set on the commands of recurring ticks only. Unique for the
      // life of the row, finished or not: that key is what makes a tick run once across instances.
      `ALTER TABLE ${t} ADD COLUMN schedule_name TEXT`,
      `ALTER TABLE ${t} ADD COLUMN schedule_tick INTEGER`,
      `CREATE UNIQUE INDEX IF NOT EXISTS ${t}_schedule_tick ON ${t} (schedule_name, schedule_tick)
         WHERE schedule_name IS NOT NULL`,
      `CREATE TABLE IF NOT EXISTS ${t}_schedules (
        name        TEXT    PRIMARY KEY,
        type        TEXT    NOT NULL,
        cron        TEXT    NOT NULL,
        timezone    TEXT,
        paused      INTEGER NOT NULL DEFAULT 0,
        last_tick   INTEGER,
        active_from INTEGER NOT NULL
      )`,
    ],
  },
  {
    version: 8,
    name: 'priorities and ordering keys',
    statements: (t) => [
      `ALTER TABLE ${t} ADD COLUMN priority INTEGER NOT NULL DEFAULT ${DEFAULT_PRIORITY}`,
      `ALTER TABLE ${t} ADD COLUMN ordering_key TEXT`,
      // The due claim walks this in (priority, next_run_at, id) order and stops after LIMIT rows;
      // the due index stays for the oldest due time (stats, health probe).
      `CREATE INDEX IF NOT EXISTS ${t}_claim ON ${t} (priority, next_run_at, id) WHERE status = 'PENDING'`,
      // The earlier commands of a key that hold it back: a command without a key is not in it.
      `CREATE INDEX IF NOT EXISTS ${t}_keyed ON ${t} (ordering_key, id)
         WHERE ordering_key IS NOT NULL AND status IN ('PENDING', 'RUNNING', 'DEAD')`,
    ],
  },
  {
    version: 9,
    name: 'schedules added at run time',
    // NULL for a schedule declared in code; the JSON settings of one added at run time.
    statements: (t) => [`ALTER TABLE ${t}_schedules ADD COLUMN run_time_settings TEXT`],
  },
  {
    version: 10,
    name: 'type limits',
    // One row per limited type; claims read it (see sql.ts claimDueLimited).
    statements: (t) => [
      `CREATE TABLE IF NOT EXISTS ${t}_type_limits (
        type        TEXT    PRIMARY KEY,
        max_running INTEGER NOT NULL
      )`,
    ],
  },
  {
    version: 11,
    name: 'paused types',
    // One row per paused type; the runtime leaves those types out of its claims.
    statements: (t) => [
      `CREATE TABLE IF NOT EXISTS ${t}_paused_types (
        type      TEXT    PRIMARY KEY,
        paused_at INTEGER NOT NULL,
        reason    TEXT
      )`,
    ],
  },
  {
    version: 12,
    name: 'executor results',
    // JSON text an executor left with ctx.setResult, written with its SUCCESS; NULL otherwise.
    statements: (t) => [`ALTER TABLE ${t} ADD COLUMN result TEXT`],
  },
  {
    version: 13,
    name: 'rate limits',
    // One token bucket per rate-limited type; the runtime takes from it before it claims (rate-limits.ts).
    statements: (t) => [rateLimitsDdl(t)],
  },
  {
    version: 14,
    name: 'key limits',
    // One row per key-limited type; a keyed claim reads it and counts per key (key-limits.ts).
    statements: (t) => [keyLimitsDdl(t)],
  },
  {
    version: 15,
    name: 'key rate limits',
    // A rate limit per key: its row, and a token bucket per key in use (key-limits.ts).
    statements: (t) => keyRateLimitsDdl(t),
  },
  {
    version: 16,
    name: 'dependencies and workflows',
    // WAITING commands, their edges and the triggers that release them (dependencies.ts).
    statements: (t) => [...widenStatusCheck(t), ...dependenciesDdl(t)],
    editsSchemaText: true,
  },
  {
    version: 17,
    name: 'progress, and the workflow of a command',
    // The latest ctx.progress report of a command (NULL before any); the workflow a command is a
    // step of, found by its command id (the dashboard's link from a command to its workflow).
    statements: (t) => [
      `ALTER TABLE ${t} ADD COLUMN progress_done INTEGER`,
      `ALTER TABLE ${t} ADD COLUMN progress_total INTEGER`,
      `CREATE INDEX IF NOT EXISTS ${t}_workflow_steps_command ON ${t}_workflow_steps (command_id)`,
    ],
  },
  {
    version: 18,
    name: 'dependency triggers by rowid',
    // The settle triggers of version 16 found the dependants to move by a condition the planner
    // answered with the status index, walking every WAITING row per completion: these reach the
    // command table by rowid only, and write each dependant once (dependencies.ts).
    statements: (t) => settleTriggersDdl(t),
  },
  {
    version: 19,
    name: 'flow keys',
    // Each keyed type's key field, and every command's key in a column and a partial index, so a
    // keyed claim reads a bounded number of rows per key (flow-keys.ts).
    statements: (t) => flowKeysDdl(t),
  },
  {
    version: 20,
    name: 'finished commands leave the command table',
    // The history table a completion moves each finished command into (history.ts).
    statements: (t) => historyDdl(t),
  },
  {
    version: 21,
    name: 'submit windows',
    // The windows of leading-edge throttles (submit-windows.ts): a small table of its own.
    statements: (t) => submitWindowsDdl(t),
  },
  {
    version: 22,
    name: 'key weights',
    // A weighted fair share's weights (keyWeightsJson's text; NULL: none), on the key-limit row a
    // keyed claim reads anyway.
    statements: (t) => [`ALTER TABLE ${t}_key_limits ADD COLUMN key_weights TEXT`],
  },
  {
    version: 23,
    name: 'claims per type',
    // The claim index led by type, in place of the one in claim order alone: a claim reads only its
    // own types' due rows, each type in claim order (store.ts merges several), never another type's
    // backlog.
    statements: (t) => [
      `CREATE INDEX IF NOT EXISTS ${t}_claim_type ON ${t} (type, priority, next_run_at, id) WHERE status = 'PENDING'`,
      `DROP INDEX IF EXISTS ${t}_claim`,
    ],
  },
];

/**
 * The runner's engine on SQLite: the lock is the write lock of one IMMEDIATE transaction (`inTransaction`,
 * the store's own), so a second process running migrate at the same time waits for it, then finds
 * everything applied.
 */
export function sqliteMigrationEngine(
  db: Database.Database,
  table: string,
  inTransaction: <T>(run: () => Promise<T>) => Promise<T>,
): MigrationEngine<string, Database.Database, SqliteMigration> {
  return {
    withMigrationLock: (run) => inTransaction(() => run(db)),
    setup: async (session) => {
      session.exec(migrationsTable(table));
    },
    appliedVersions: async () => appliedVersions(db, table),
    context: async () => table,
    apply: async (session, statements, m) => {
      if (m.editsSchemaText !== true) {
        for (const statement of statements) session.exec(statement);
        return;
      }
      session.unsafeMode(true);
      try {
        for (const statement of statements) session.exec(statement);
      } finally {
        session.unsafeMode(false);
      }
    },
    recordVersion: async (session, m) => {
      session
        .prepare(`INSERT INTO ${table}_migrations (version, name, applied_at) VALUES (?, ?, ?)`)
        .run(m.version, m.name, Date.now());
    },
  };
}

/** The table that records the applied versions. */
function migrationsTable(table: string): string {
  return `CREATE TABLE IF NOT EXISTS ${table}_migrations (
        version    INTEGER PRIMARY KEY,
        name       TEXT    NOT NULL,
        applied_at INTEGER NOT NULL
      )`;
}

/** The versions recorded as applied; none when the migrations table is not there. */
export function appliedVersions(db: Database.Database, table: string): Set<number> {
  const present = db
    .prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`)
    .get(`${table}_migrations`);
  if (present === undefined) return new Set();
  return new Set(
    db
      .prepare(`SELECT version FROM ${table}_migrations`)
      .pluck()
      .all()
      .map((v) => Number(v)),
  );
}

/** What runMigrations would run on a database that has applied `applied`, as text. */
export function migrationScript(table: string, applied: ReadonlySet<number>): MigrationScript {
  return migrationScriptOf(MIGRATIONS, applied, table, {
    setup: [migrationsTable(table)],
    transactional: true,
    recordVersion: (m) =>
      `INSERT INTO ${table}_migrations (version, name, applied_at) VALUES (${m.version}, ${sqlStringLiteral(m.name)}, ${NOW_MS})`,
  });
}

/** Epoch milliseconds in SQL every SQLite has (unixepoch('subsec') needs 3.42), e.g. an older sqlite3 shell. */
const NOW_MS = `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`;
