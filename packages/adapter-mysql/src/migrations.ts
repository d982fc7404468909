import { createHash } from 'node:crypto';
import { DEFAULT_PRIORITY, type MigrationScript } from '@asynccmd/core';
import { migrationScriptOf, runMigrations as runEngine, sqlStringLiteral } from '@asynccmd/core/store-kit';
import type { Migration, MigrationEngine } from '@asynccmd/core/store-kit';
import type { Pool, PoolConnection } from 'mysql2/promise';
import { select, withConnection, write } from './connection.js';
import { dependenciesDdl, widenStatusCheck } from './dependencies.js';
import { rateLimitsDdl } from './rate-limits.js';
import { keyLimitsDdl, keyRateLimitsDdl } from './key-limits.js';
import { flowKeysDdl } from './flow-keys.js';
import { historyDdl } from './history.js';
import { submitWindowsDdl } from './submit-windows.js';

/**
 * Versioned schema changes (core's runMigrations applies them), numbered as in the other adapters
 * (1 = the command table and its indexes), recorded in `<table>_migrations`. MySQL commits each DDL statement on its own, so every
 * statement is idempotent (IF NOT EXISTS) and a half-applied version re-runs cleanly; two processes
 * migrating at once take turns under a named lock (GET_LOCK), released even if the holder dies.
 */
export interface MysqlMigration extends Migration<MigrationContext> {
  /**
   * An index the version adds, for a version that is one ALTER TABLE (all or nothing): MySQL has no
   * ADD COLUMN / ADD INDEX IF NOT EXISTS, so when the index is there the ALTER already ran (its
   * record was lost with the connection) and the version is only recorded.
   */
  readonly addsIndex?: string;
  /** The same for a version that is one ALTER TABLE adding a column: `<table><tableSuffix>`.`column`. */
  readonly addsColumn?: { readonly tableSuffix: string; readonly column: string };
  /**
   * For a version whose statements depend on what the catalog holds when it runs: they, read from
   * it (instead of `statements`); `fresh` for a script run from scratch (no table yet, or --all),
   * written for the table as the script's earlier versions create it.
   */
  catalogStatements?(
    conn: PoolConnection,
    table: string,
    collation: string,
    fresh: boolean,
  ): Promise<string[]>;
}

/** What the statements are written for: the table, and the binary collation this server has. */
export interface MigrationContext {
  readonly table: string;
  readonly collation: string;
}

export const MIGRATIONS: readonly MysqlMigration[] = [
  {
    version: 1,
    name: 'command table and the indexes of its hot paths',
    statements: ({ table: t, collation }) => [
      // DATETIME(3) in UTC: millisecond precision, and no conversion by the session time zone
      // (TIMESTAMP would convert, and ends in 2038). A binary collation, so 'A' and 'a' are different
      // types and business keys. payload is LONGTEXT: the JSON text exactly as submitted (MySQL's
      // JSON type would reorder keys and reformat numbers, and MariaDB's is LONGTEXT anyway).
      `CREATE TABLE IF NOT EXISTS \`${t}\` (
        id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
        type         VARCHAR(128)    NOT NULL,
        biz_key      VARCHAR(255)    NULL,
        payload      LONGTEXT        NOT NULL,
        status       VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'PENDING',
        max_retry    INT             NOT NULL,
        retry_count  INT             NOT NULL DEFAULT 0,
        rescue_count INT             NOT NULL DEFAULT 0,
        next_run_at  DATETIME(3)     NOT NULL,
        last_error   VARCHAR(500)    NULL,
        owner        VARCHAR(128)    NULL,
        claim_token  VARCHAR(128)    NULL,
        lease_until  DATETIME(3)     NULL,
        idempotent   TINYINT(1)      NOT NULL DEFAULT 0,
        headers      TEXT            NOT NULL,
        created_at   DATETIME(3)     NOT NULL,
        updated_at   DATETIME(3)     NOT NULL,
        started_at   DATETIME(3)     NULL,
        finished_at  DATETIME(3)     NULL,
        -- The business key while the command holds its idempotency key (idempotent and unfinished),
        -- NULL otherwise. A UNIQUE index ignores NULLs, so (type, active_key) admits one holder.
        active_key   VARCHAR(255) GENERATED ALWAYS AS (
                       CASE WHEN idempotent = 1 AND status IN ('PENDING', 'RUNNING') THEN biz_key END
                     ) STORED,
        PRIMARY KEY (id),
        -- The due claim walks this in (next_run_at, id) order and stops after LIMIT rows.
        KEY idx_due (status, next_run_at, id),
        KEY idx_claim_token (claim_token),
        KEY idx_type_biz (type, biz_key),
        UNIQUE KEY uq_active_key (type, active_key),
        KEY idx_finished (status, finished_at),
        CHECK (status IN ('PENDING', 'RUNNING', 'SUCCESS', 'DEAD', 'CANCELLED'))
      ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ${collation} ROW_FORMAT = DYNAMIC`,
    ],
  },
  {
    version: 2,
    name: 'attempt history and lists by creation time',
    addsIndex: 'idx_created',
    statements: ({ table: t }) => [
      // One ALTER: all or nothing. history is NULL until the first attempt ends (MySQL gives TEXT
      // no literal default). Lists run newest first by (created_at, id); InnoDB appends the primary
      // key to the index.
      `ALTER TABLE \`${t}\`
         ADD COLUMN claimed_by            VARCHAR(128) NULL,
         ADD COLUMN retry_count_at_retry  INT          NOT NULL DEFAULT 0,
         ADD COLUMN rescue_count_at_retry INT          NOT NULL DEFAULT 0,
         ADD COLUMN history               TEXT         NULL,
         ADD KEY idx_created (created_at)`,
    ],
  },
  {
    version: 3,
    name: 'dead-letter lookup',
    // The health probe's dead-letter count walks the status-leading indexes of version 1 (idx_due,
    // idx_finished); the version is recorded so the numbers mean the same on every adapter.
    statements: () => [],
  },
  {
    version: 4,
    name: 'recent outcomes lookup',
    // Outcome counts read a range of the (status, finished_at) index of version 1; the version is
    // recorded so the numbers mean the same on every adapter.
    statements: () => [],
  },
  {
    version: 7,
    name: 'recurring schedules and the once-per-tick key',
    addsIndex: 'uq_schedule_tick',
    statements: ({ table: t, collation }) => [
      `CREATE TABLE IF NOT EXISTS \`${t}_schedules\` (
        name        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
        type        VARCHAR(128) NOT NULL,
        cron        VARCHAR(200) NOT NULL,
        timezone    VARCHAR(200) NULL,
        paused      TINYINT(1)   NOT NULL DEFAULT 0,
        last_tick   DATETIME(3)  NULL,
        active_from DATETIME(3)  NOT NULL,
        PRIMARY KEY (name)
      ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ${collation}`,
      // One ALTER, last: all or nothing, and its key tells a re-run that the version is done. Set on
      // the commands of recurring ticks only; a UNIQUE key ignores NULLs, so ordinary commands never
      // meet it, and it holds for the life of the row, finished or not.
      `ALTER TABLE \`${t}\`
         ADD COLUMN schedule_name VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
         ADD COLUMN schedule_tick DATETIME(3) NULL,
         ADD UNIQUE KEY uq_schedule_tick (schedule_name, schedule_tick)`,
    ],
  },
  {
    version: 8,
    name: 'priorities and ordering keys',
    addsIndex: 'idx_claim',
    statements: ({ table: t }) => [
      // The slots keyed submits lock (a key's slot by its hash, see store.ts), so the commands of a
      // key get their ids in the order their transactions commit: a fixed, small table.
      `CREATE TABLE IF NOT EXISTS \`${t}_key_locks\` (
         slot SMALLINT NOT NULL,
         PRIMARY KEY (slot)
       ) ENGINE = InnoDB`,
      `INSERT INTO \`${t}_key_locks\` (slot)
       VALUES ${Array.from({ length: KEY_LOCK_SLOTS }, (_, i) => `(${i})`).join(', ')}
       ON DUPLICATE KEY UPDATE slot = slot`,
      // One ALTER, last: all or nothing, and its key tells a re-run that the version is done. The
      // claim walks idx_claim in (priority, next_run_at, id) order and stops after LIMIT rows; idx_due
      // stays for the oldest due time (stats, health probe). ordering_unfinished is the key while the
      // command holds it back from later ones (PENDING, RUNNING, DEAD), NULL otherwise: a command
      // without a key is one NULL entry of idx_keyed that no status change of it touches.
      `ALTER TABLE \`${t}\`
         ADD COLUMN priority     SMALLINT     NOT NULL DEFAULT ${DEFAULT_PRIORITY},
         ADD COLUMN ordering_key VARCHAR(128) NULL,
         ADD COLUMN ordering_unfinished VARCHAR(128) GENERATED ALWAYS AS (
           CASE WHEN status IN ('PENDING', 'RUNNING', 'DEAD') THEN ordering_key END
         ) STORED,
         ADD KEY idx_claim (status, priority, next_run_at, id),
         ADD KEY idx_keyed (ordering_unfinished, id)`,
    ],
  },
  {
    version: 9,
    name: 'schedules added at run time',
    // NULL for a schedule declared in code; the JSON settings of one added at run time.
    addsColumn: { tableSuffix: '_schedules', column: 'run_time_settings' },
    statements: ({ table: t }) => [
      `ALTER TABLE \`${t}_schedules\` ADD COLUMN run_time_settings LONGTEXT NULL`,
    ],
  },
  {
    version: 10,
    name: 'type limits',
    // One row per limited type: a limited claim locks it, then counts (type-limits.ts). The type
    // compares as the command table's type column does.
    statements: ({ table: t, collation }) => [
      `CREATE TABLE IF NOT EXISTS \`${t}_type_limits\` (
         type        VARCHAR(128) NOT NULL,
         max_running INT          NOT NULL,
         -- Bumped by every limited claim: its lock is a write (see type-limits.ts).
         claims      BIGINT       NOT NULL DEFAULT 0,
         PRIMARY KEY (type)
       ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ${collation}`,
    ],
  },
  {
    version: 11,
    name: 'paused types',
    // One row per paused type; the runtime leaves those types out of its claims. The type compares
    // as the command table's type column does; paused_at is UTC, as every time of this adapter.
    statements: ({ table: t, collation }) => [
      `CREATE TABLE IF NOT EXISTS \`${t}_paused_types\` (
         type      VARCHAR(128) NOT NULL,
         paused_at DATETIME(3)  NOT NULL,
         reason    TEXT         NULL,
         PRIMARY KEY (type)
       ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ${collation}`,
    ],
  },
  {
    version: 12,
    name: 'executor results',
    // The JSON an executor left with ctx.setResult, written with its SUCCESS; NULL otherwise.
    // LONGTEXT in the table's utf8mb4, as payload: the text exactly as the executor left it.
    addsColumn: { tableSuffix: '', column: 'result' },
    statements: ({ table: t }) => [`ALTER TABLE \`${t}\` ADD COLUMN result LONGTEXT NULL`],
  },
  {
    version: 13,
    name: 'rate limits',
    // One token bucket per rate-limited type; the runtime takes from it before it claims (rate-limits.ts).
    statements: ({ table: t, collation }) => [rateLimitsDdl(t, collation)],
  },
  {
    version: 14,
    name: 'key limits',
    // One row per key-limited type; a keyed claim locks it, then counts per key (key-limits.ts).
    statements: ({ table: t, collation }) => [keyLimitsDdl(t, collation)],
  },
  {
    version: 15,
    name: 'key rate limits',
    // A rate limit per key: its row, and a token bucket per key in use (key-limits.ts).
    statements: ({ table: t, collation }) => keyRateLimitsDdl(t, collation),
  },
  {
    version: 16,
    name: 'dependencies and workflows',
    // WAITING commands and their edges; the store settles them (dependencies.ts). The status
    // CHECK's name is the server's: read from the catalog (catalogStatements) when the version runs.
    statements: ({ table: t, collation }) => dependenciesDdl(t, collation, false),
    catalogStatements: async (conn, t, collation, fresh) => [
      ...(await widenStatusCheck(conn, t, fresh)),
      ...dependenciesDdl(t, collation, !fresh && (await hasColumn(conn, t, 'has_dependants'))),
    ],
  },
  {
    version: 17,
    name: 'progress, and the workflow of a command',
    // The latest ctx.progress report of a command (NULL before any: an instant ADD COLUMN); the
    // workflow a command is a step of, found by its command id. Two ALTERs that each commit: a
    // re-run leaves out what the catalog shows is there (catalogStatements).
    statements: ({ table: t }) => progressDdl(t, false, false),
    catalogStatements: async (conn, t, _collation, fresh) =>
      progressDdl(
        t,
        !fresh && (await hasColumn(conn, t, 'progress_done')),
        !fresh && (await hasIndex(conn, `${t}_workflow_steps`, 'idx_command')),
      ),
  },
  {
    version: 18,
    name: 'flow keys',
    // Each keyed type's key field, and every command's key in a column and an index, so a keyed
    // claim reads a bounded number of rows per key (flow-keys.ts). The ALTER commits on its own: a
    // re-run leaves it out when the catalog shows its index (catalogStatements).
    statements: ({ table: t, collation }) => flowKeysDdl(t, collation, false),
    catalogStatements: async (conn, t, collation, fresh) =>
      flowKeysDdl(t, collation, !fresh && (await hasIndex(conn, t, 'idx_flow'))),
  },
  {
    version: 19,
    name: 'finished commands leave the command table, history in time partitions',
    // The history the store moves finished commands into, partitioned by finish time so retention
    // drops partitions (history.ts). Finished rows already in the command table move in batches
    // once the store runs, oldest first: no statement here scans them.
    statements: ({ table: t, collation }) => historyDdl(t, collation),
  },
  {
    version: 20,
    name: 'submit windows',
    // The windows of leading-edge throttles (submit-windows.ts): a small table of its own.
    statements: ({ table: t, collation }) => submitWindowsDdl(t, collation),
  },
  {
    version: 21,
    name: 'key weights',
    // A weighted fair share's weights (keyWeightsJson's text; NULL: none), on the key-limit row a
    // keyed claim reads anyway. One ALTER: a re-run finds the column and only records the version.
    statements: ({ table: t }) => [`ALTER TABLE \`${t}_key_limits\` ADD COLUMN key_weights MEDIUMTEXT NULL`],
    addsColumn: { tableSuffix: '_key_limits', column: 'key_weights' },
  },
  {
    version: 22,
    name: 'claims per type',
    // The claim index led by type, in place of the one in claim order alone: a claim reads only its
    // own types' due rows, each type in claim order (claim-strategies.ts shares a round of several
    // among them), never another type's backlog. One ALTER: its key tells a re-run it is done.
    addsIndex: 'idx_claim_type',
    statements: ({ table: t }) => [
      `ALTER TABLE \`${t}\`
         ADD KEY idx_claim_type (status, type, priority, next_run_at, id),
         DROP KEY idx_claim`,
    ],
  },
];

/** Migration 17's statements, but those whose result the catalog shows already. */
function progressDdl(t: string, hasColumns: boolean, hasStepIndex: boolean): string[] {
  return [
    ...(hasColumns
      ? []
      : [
          `ALTER TABLE \`${t}\` ADD COLUMN progress_done BIGINT UNSIGNED NULL,
             ADD COLUMN progress_total BIGINT UNSIGNED NULL`,
        ]),
    ...(hasStepIndex ? [] : [`ALTER TABLE \`${t}_workflow_steps\` ADD INDEX idx_command (command_id)`]),
  ];
}

/** Rows of `<table>_key_locks`: keys sharing a slot only wait for each other's submits to commit. */
export const KEY_LOCK_SLOTS = 1024;

/** No-pad binary collations compare 'a' and 'a ' as different keys; older servers only have utf8mb4_bin. */
const COLLATION_PREFERENCE = ['utf8mb4_0900_bin', 'utf8mb4_nopad_bin', 'utf8mb4_bin'];

const LOCK_TIMEOUT_S = 60;

/** Applies the versions this database lacks; returns the versions applied. */
export async function runMigrations(pool: Pool, table: string): Promise<number[]> {
  return runEngine(mysqlMigrationEngine(pool, table), MIGRATIONS);
}

/**
 * The runner's engine on MySQL: a named lock (GET_LOCK) on one connection, released even if the
 * holder dies; no transaction (each DDL statement commits on its own).
 */
function mysqlMigrationEngine(
  pool: Pool,
  table: string,
): MigrationEngine<MigrationContext, PoolConnection, MysqlMigration> {
  return {
    withMigrationLock: (run) =>
      withConnection(pool, async (conn) => {
        // Lock names are limited to 64 characters: hash the database-qualified table name.
        const [db] = await select<{ db: string | null }>(conn, 'SELECT DATABASE() AS db');
        if (!db?.db)
          throw new Error('the MySQL store needs a default database (database option or URI path)');
        const lockName = `asynccmd:${createHash('sha1').update(`${db.db}.${table}`).digest('hex')}`;
        const [locked] = await select<{ ok: number | null }>(conn, 'SELECT GET_LOCK(?, ?) AS ok', [
          lockName,
          LOCK_TIMEOUT_S,
        ]);
        if (Number(locked?.ok) !== 1)
          throw new Error(`could not take the migration lock for ${table} within 60 s`);
        try {
          return await run(conn);
        } finally {
          await conn.query('SELECT RELEASE_LOCK(?)', [lockName]);
        }
      }),
    setup: async (conn) => {
      await write(conn, migrationsTable(table));
    },
    appliedVersions: async (conn) =>
      new Set(
        (await select<{ version: number }>(conn, `SELECT version FROM \`${table}_migrations\``)).map((r) =>
          Number(r.version),
        ),
      ),
    context: async (conn) => ({ table, collation: await binaryCollation(conn) }),
    apply: async (conn, statements, m) => {
      const ran =
        (m.addsIndex !== undefined && (await hasIndex(conn, table, m.addsIndex))) ||
        (m.addsColumn !== undefined &&
          (await hasColumn(conn, `${table}${m.addsColumn.tableSuffix}`, m.addsColumn.column)));
      if (ran) return;
      const list = m.catalogStatements
        ? await m.catalogStatements(conn, table, await binaryCollation(conn), false)
        : statements;
      for (const statement of list) await write(conn, statement);
    },
    recordVersion: async (conn, m) => {
      await write(
        conn,
        `INSERT INTO \`${table}_migrations\` (version, name, applied_at) VALUES (?, ?, UTC_TIMESTAMP(3))`,
        [m.version, m.name],
      );
    },
  };
}

async function hasIndex(conn: Parameters<typeof select>[0], table: string, index: string): Promise<boolean> {
  return inCatalog(conn, 'STATISTICS', 'INDEX_NAME', table, index);
}

async function hasColumn(
  conn: Parameters<typeof select>[0],
  table: string,
  column: string,
): Promise<boolean> {
  return inCatalog(conn, 'COLUMNS', 'COLUMN_NAME', table, column);
}

/** Whether information_schema.<view> has a row of `table` in this database whose <field> is `name`. */
async function inCatalog(
  conn: Parameters<typeof select>[0],
  view: 'STATISTICS' | 'COLUMNS',
  field: 'INDEX_NAME' | 'COLUMN_NAME',
  table: string,
  name: string,
): Promise<boolean> {
  const rows = await select(
    conn,
    `SELECT 1 AS present FROM information_schema.${view}
     WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND ${field} = ? LIMIT 1`,
    [table, name],
  );
  return rows.length > 0;
}

async function binaryCollation(conn: Parameters<typeof select>[0]): Promise<string> {
  const rows = await select<{ name: string }>(
    conn,
    'SELECT COLLATION_NAME AS name FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN (?)',
    [COLLATION_PREFERENCE],
  );
  const available = new Set(rows.map((r) => r.name));
  return COLLATION_PREFERENCE.find((c) => available.has(c)) ?? 'utf8mb4_bin';
}

/** The table that records the applied versions. */
function migrationsTable(table: string): string {
  return `CREATE TABLE IF NOT EXISTS \`${table}_migrations\` (
           version    INT          NOT NULL PRIMARY KEY,
           name       VARCHAR(200) NOT NULL,
           applied_at DATETIME(3)  NOT NULL
         ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4`;
}

/**
 * What runMigrations would run on this database, as text: the versions it lacks (all of them with
 * `all`), in the binary collation it would pick on this server.
 */
export async function migrationScript(pool: Pool, table: string, all: boolean): Promise<MigrationScript> {
  return withConnection(pool, async (conn) => {
    const present = await select(
      conn,
      'SELECT 1 AS present FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?',
      [`${table}_migrations`],
    );
    const applied =
      all || present.length === 0
        ? new Set<number>()
        : new Set(
            (await select<{ version: number }>(conn, `SELECT version FROM \`${table}_migrations\``)).map(
              (r) => Number(r.version),
            ),
          );
    const collation = await binaryCollation(conn);
    const fresh = all || !applied.has(1);
    const migrations: MysqlMigration[] = [];
    for (const m of MIGRATIONS) {
      const read =
        m.catalogStatements && !applied.has(m.version)
          ? await m.catalogStatements(conn, table, collation, fresh)
          : null;
      migrations.push(read === null ? m : { ...m, statements: () => read });
    }
    return migrationScriptOf(
      migrations,
      applied,
      { table, collation },
      {
        setup: [migrationsTable(table)],
        transactional: false,
        recordVersion: (m) =>
          `INSERT INTO \`${table}_migrations\` (version, name, applied_at) ` +
          `VALUES (${m.version}, ${sqlStringLiteral(m.name)}, UTC_TIMESTAMP(3))`,
      },
    );
  });
}
