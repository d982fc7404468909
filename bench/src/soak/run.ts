import { createMysqlStore } from '@asynccmd/adapter-mysql';
import { createPostgresStore } from '@asynccmd/adapter-postgres';
import type { RowDataPacket } from 'mysql2/promise';
import pg from 'pg';
import { graphileSettings, migrateGraphile } from '../baselines/graphile.js';
import { pgBossSettings, preparePgBossSoak } from '../baselines/pg-boss.js';
import { runDrain, type DrainTarget } from '../drain.js';
import { Child, sleep } from '../fleet.js';
import { dropDatabase, MYSQL_CONFIG, mysqlPool, recreateDatabase } from '../mysql.js';
import { dropSchema, PG_URL, pgPool, recreateSchema, usePgUrl } from '../pg.js';
import type { ConsumerSpec, SystemSpec } from '../protocol.js';
import { asynccmdMysqlTarget, MYSQL_DATABASES } from '../scenarios/mysql-targets.js';
import { asynccmdPgTarget, graphileTarget, pgBossTarget } from '../scenarios/pg-targets.js';
import { migrateWith } from '../scenarios/migrate.js';
import { peer } from '../versions.js';
import type { SoakSubmitterSpec } from '../workers/soak-submitter.js';
import { startTempPostgres } from './temp-pg.js';
import {
  heldVerdicts,
  soakTiming,
  soakVerdicts,
  type SoakSystem,
  type SoakTiming,
  type SoakVariant,
  type SoakVerdict,
  type SoakWindow,
} from './windows.js';

/** The soak (`--scenarios soak`): its options, from main. */
export interface SoakOptions {
  readonly minutes: number;
  /** Commands/s submitted; undefined: 70 % of the slowest system's drain rate measured on the server. */
  readonly rate: number | undefined;
  readonly quick: boolean;
  readonly systems: readonly SoakSystem[];
  readonly variants: readonly SoakVariant[];
  /** Which servers: PostgreSQL (servers of the soak's own), MariaDB (the shared one, asynccmd only). */
  readonly databases: readonly SoakDatabaseName[];
}

export type SoakDatabaseName = 'PostgreSQL' | 'MariaDB';

/** One system's soak run in one variant. */
export interface SoakRun {
  readonly database: SoakDatabaseName;
  readonly system: SoakSystem;
  readonly label: string;
  readonly settings: string;
  readonly variant: SoakVariant;
  readonly server: string;
  /** What the dead-tuples column counts on this server. */
  readonly deadMeaning: string;
  readonly timing: SoakTiming;
  readonly submitRate: number;
  /** The drain rates measured at the start on this server (C=10, one process), jobs/s. */
  readonly measuredDrain: Readonly<Partial<Record<SoakSystem, number>>>;
  readonly windows: SoakWindow[];
  readonly verdicts: SoakVerdict[];
  readonly errors: string[];
}

const CONCURRENCY = 10;
const SUBMIT_CLIENTS = 4;
const PER_TRANSACTION = 10;
const SCHEMAS: Readonly<Record<SoakSystem, string>> = {
  asynccmd: 'soak_asynccmd',
  graphile: 'soak_graphile',
  'pg-boss': 'soak_pgboss',
};
const PGBOSS_BATCH = 500;

export const SUBMITTER_SETTINGS = `one submitter process, ${SUBMIT_CLIENTS} clients, up to ${PER_TRANSACTION} commands per transaction by each system's batch submit (asynccmd client.submitMany, graphile-worker add_jobs, pg-boss insert), paced to the rate; each payload carries when its submit began, the consumer measures submit → start`;

function label(system: SoakSystem): string {
  if (system === 'asynccmd') return 'asynccmd defaults, retention';
  return system === 'graphile'
    ? `${peer('graphile-worker')}, local queue`
    : `${peer('pg-boss')}, batchSize ${PGBOSS_BATCH}`;
}

function settings(system: SoakSystem, t: SoakTiming): string {
  if (system === 'asynccmd') {
    return `executor mode ASYNC_POOL; runtime defaults, sharedPool { concurrency: ${CONCURRENCY} }, retention { olderThanMs: ${t.retentionS * 1000}, intervalMs: ${t.purgeIntervalS * 1000} } (its retention option, batches of 1000)`;
  }
  if (system === 'graphile')
    return `${graphileSettings(true)}, C=${CONCURRENCY}; a finished job is deleted by its completion (no retention to set)`;
  return `${pgBossSettings(PGBOSS_BATCH)}, C=${CONCURRENCY}; maintenance on (supervise, default intervals), queue deleteAfterSeconds ${t.retentionS}`;
}

function retention(t: SoakTiming): { olderThanMs: number; intervalMs: number } {
  return { olderThanMs: t.retentionS * 1000, intervalMs: t.purgeIntervalS * 1000 };
}

/** A server the soak runs on: how it sets a system up, measures its tables and holds a snapshot. */
interface SoakDatabase {
  readonly name: SoakDatabaseName;
  readonly server: string;
  /** What the `dead tuples` column counts on this server. */
  readonly deadMeaning: string;
  consumer(system: SoakSystem, t: SoakTiming): ConsumerSpec;
  submitter(system: SoakSystem): SoakSubmitterSpec['system'];
  prepare(system: SoakSystem, t: SoakTiming): Promise<void>;
  drainTarget(system: SoakSystem): DrainTarget;
  tableState(system: SoakSystem): Promise<{ bytes: number; dead: number; autovacuums: number }>;
  /** The analytics query: a REPEATABLE READ transaction on another connection, its snapshot held. */
  holdSnapshot(seconds: number): Promise<void>;
  drop(system: SoakSystem): Promise<void>;
  close(): Promise<void>;
}

/** A PostgreSQL server of the soak's own; this process and its children point at it until close. */
async function postgresSoak(autovacuum: boolean): Promise<SoakDatabase> {
  const server = await startTempPostgres({ autovacuum });
  const before = usePgUrl(server.url);
  const pool = pgPool(2);
  const { rows } = await pool.query<{ v: string }>("SELECT split_part(version(), ' on ', 1) AS v");
  return {
    name: 'PostgreSQL',
    server: `${rows[0]?.v ?? 'PostgreSQL'}: ${server.settings}`,
    deadMeaning: "n_dead_tup of the schema's tables (pg_stat_user_tables)",
    consumer: (system, t) => {
      const schema = SCHEMAS[system];
      const spec: SystemSpec =
        system === 'asynccmd'
          ? { kind: 'asynccmd-pg', schema, retention: retention(t) }
          : system === 'graphile'
            ? { kind: 'graphile', schema, performance: true }
            : { kind: 'pg-boss', schema, batchSize: PGBOSS_BATCH, maintained: true };
      return { system: spec, concurrency: CONCURRENCY, recordStarts: false };
    },
    submitter: (system) => ({
      kind: system === 'asynccmd' ? 'asynccmd-pg' : system,
      schema: SCHEMAS[system],
    }),
    // Fresh tables of a system, created by its own migration, autovacuum as the server has it.
    prepare: async (system, t) => {
      const schema = SCHEMAS[system];
      if (system === 'asynccmd') {
        await recreateSchema(pool, schema);
        await migrateWith(() =>
          createPostgresStore({ connectionString: PG_URL, schema, poolConfig: { max: 1 } }),
        );
      } else if (system === 'graphile') {
        await dropSchema(pool, schema);
        await migrateGraphile(schema);
      } else {
        await dropSchema(pool, schema);
        await preparePgBossSoak(schema, t.retentionS);
      }
      await pool.query('CHECKPOINT');
    },
    drainTarget: (system) => {
      if (system === 'asynccmd') return asynccmdPgTarget(pool, 0);
      return system === 'graphile' ? graphileTarget(pool, true) : pgBossTarget(pool, PGBOSS_BATCH);
    },
    // Tables + indexes + TOAST of the schema, and its dead tuples, as the server counts them.
    tableState: async (system) => {
      const { rows } = await pool.query<{ bytes: string; dead: string; autovacuums: string }>(
        `SELECT
           (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
              JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')) AS bytes,
           (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = $1) AS dead,
           (SELECT coalesce(sum(autovacuum_count), 0) FROM pg_stat_user_tables WHERE schemaname = $1) AS autovacuums`,
        [SCHEMAS[system]],
      );
      return {
        bytes: Number(rows[0]?.bytes ?? 0),
        dead: Number(rows[0]?.dead ?? 0),
        autovacuums: Number(rows[0]?.autovacuums ?? 0),
      };
    },
    holdSnapshot: async (seconds) => {
      const client = new pg.Client({ connectionString: server.url });
      client.on('error', () => undefined);
      await client.connect();
      try {
        await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
        await client.query('SELECT count(*) FROM pg_class');
        await sleep(seconds * 1000);
        await client.query('COMMIT');
      } finally {
        await client.end();
      }
    },
    drop: (system) => dropSchema(pool, SCHEMAS[system]),
    close: async () => {
      await pool.end();
      usePgUrl(before);
      server.stop();
    },
  };
}

const MARIADB_DATABASE = 'bench_soak_asynccmd';

/**
 * The shared MariaDB (as the MariaDB drains use it; its configuration is the server's, InnoDB purge
 * as configured): asynccmd only, with the skip-locked claim.
 */
async function mariadbSoak(): Promise<SoakDatabase> {
  const admin = mysqlPool(2);
  const [version] = await admin.query<RowDataPacket[]>('SELECT VERSION() AS v');
  return {
    name: 'MariaDB',
    server: `the shared MariaDB ${String(version[0]?.['v'] ?? '')} (its configuration; other clients' work on it counts in the history length)`,
    deadMeaning: 'the InnoDB history list length (undo not yet purged, server-wide)',
    consumer: (_system, t) => ({
      system: {
        kind: 'asynccmd-mysql',
        database: MARIADB_DATABASE,
        claimStrategy: 'skip-locked',
        retention: retention(t),
      },
      concurrency: CONCURRENCY,
      recordStarts: false,
    }),
    submitter: () => ({ kind: 'asynccmd-mysql', schema: MARIADB_DATABASE }),
    prepare: async () => {
      await recreateDatabase(admin, MARIADB_DATABASE);
      await migrateWith(() =>
        createMysqlStore({ connection: { ...MYSQL_CONFIG, database: MARIADB_DATABASE }, connectionLimit: 1 }),
      );
    },
    drainTarget: () => asynccmdMysqlTarget(admin, 'skip-locked', 0),
    // The .ibd files of the database (file per table: data, indexes and off-page columns).
    tableState: async () => {
      const [rows] = await admin.query<RowDataPacket[]>(
        `SELECT
           (SELECT COALESCE(SUM(FILE_SIZE), 0) FROM information_schema.INNODB_SYS_TABLESPACES
             WHERE NAME LIKE CONCAT(?, '/%')) AS bytes,
           (SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len') AS dead`,
        [MARIADB_DATABASE],
      );
      // InnoDB purges continuously: no autovacuum runs to count.
      return {
        bytes: Number(rows[0]?.['bytes'] ?? 0),
        dead: Number(rows[0]?.['dead'] ?? 0),
        autovacuums: Number.NaN,
      };
    },
    holdSnapshot: async (seconds) => {
      const conn = await admin.getConnection();
      try {
        await conn.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ');
        await conn.query('START TRANSACTION WITH CONSISTENT SNAPSHOT');
        await conn.query('SELECT COUNT(*) FROM information_schema.TABLES');
        await sleep(seconds * 1000);
        await conn.query('COMMIT');
      } finally {
        conn.release();
      }
    },
    drop: () => dropDatabase(admin, MARIADB_DATABASE),
    close: async () => {
      // The drain measured at the start seeded the drain scenario's database on the shared server.
      await dropDatabase(admin, MYSQL_DATABASES.skipLocked).catch(() => undefined);
      await admin.end();
    },
  };
}

/** Asks a soak child for its window and waits for the `n`-th reply. */
async function windowOf(
  child: Child,
  n: number,
): Promise<{ total: number; latency: readonly (readonly [number, number])[] }> {
  child.send({ type: 'window' });
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.errors.length > 0) throw new Error(child.errors.join('; '));
    const replies = child.received('window');
    const reply = replies[n - 1];
    if (reply) return reply;
    if (Date.now() > deadline) throw new Error('a soak child did not report its window within 30 s');
    await sleep(5);
  }
}

async function soakOne(
  db: SoakDatabase,
  system: SoakSystem,
  t: SoakTiming,
  rate: number,
  log: (line: string) => void,
): Promise<{ windows: SoakWindow[]; errors: string[] }> {
  await db.prepare(system, t);
  const submitSpec: SoakSubmitterSpec = {
    system: db.submitter(system),
    rate,
    durationMs: t.durationS * 1000,
    perTransaction: PER_TRANSACTION,
    clients: SUBMIT_CLIENTS,
  };
  const consumer = Child.start('soak-consumer', db.consumer(system, t));
  const submitter = Child.start('soak-submitter', submitSpec);
  const windows: SoakWindow[] = [];
  const errors: string[] = [];
  let hold: Promise<void> | undefined;
  try {
    await Promise.all([consumer.waitFor('ready', 60_000), submitter.waitFor('ready', 60_000)]);
    consumer.send({ type: 'go' });
    submitter.send({ type: 'go' });
    const t0 = performance.now();
    let drainedBefore = 0;
    let submittedBefore = 0;
    const count = Math.ceil(t.durationS / t.windowS);
    for (let n = 1; n <= count; n++) {
      const end = Math.min(n * t.windowS, t.durationS);
      const startS = (n - 1) * t.windowS;
      // The hold begins on its second, inside whichever window is running then.
      while (performance.now() - t0 < end * 1000) {
        if (t.holdS > 0 && hold === undefined && performance.now() - t0 >= t.holdStartS * 1000) {
          log(`  soak ${db.name} ${system}: holding a REPEATABLE READ snapshot for ${t.holdS} s`);
          hold = db.holdSnapshot(t.holdS);
          hold.catch((err: unknown) => errors.push(`held snapshot: ${String(err)}`));
        }
        await sleep(Math.min(200, Math.max(1, end * 1000 - (performance.now() - t0))));
      }
      const [c, s] = await Promise.all([windowOf(consumer, n), windowOf(submitter, n)]);
      const state = await db.tableState(system);
      const w: SoakWindow = {
        endS: end,
        seconds: end - startS,
        submitted: s.total - submittedBefore,
        drained: c.total - drainedBefore,
        // A command may start before its submitter has counted its commit: never below 0.
        backlog: Math.max(0, s.total - c.total),
        latency: c.latency,
        totalBytes: state.bytes,
        deadTuples: state.dead,
        autovacuums: state.autovacuums,
        held: t.holdS > 0 && startS < t.holdStartS + t.holdS && end > t.holdStartS,
      };
      drainedBefore = c.total;
      submittedBefore = s.total;
      windows.push(w);
      log(
        `  soak ${db.name} ${system} ${end} s: drained ${Math.round(w.drained / w.seconds)}/s, backlog ${w.backlog}, ${(w.totalBytes / 1048576).toFixed(1)} MB, ${w.deadTuples} dead${w.held ? ' (held)' : ''}`,
      );
    }
  } catch (err) {
    errors.push(err instanceof Error ? err.message : String(err));
  } finally {
    await hold?.catch(() => undefined);
    await submitter.stop(30_000);
    await consumer.stop(60_000);
    errors.push(...submitter.errors, ...consumer.errors);
  }
  return { windows, errors };
}

/**
 * Runs the soak: per database and variant a server (PostgreSQL: one of its own, autovacuum at its
 * defaults or off; MariaDB: the shared one, where autovacuum has no counterpart to turn off), the
 * drain rates measured on it first (unless a rate is given), then each system for the run's length
 * at the submit rate, one row per window.
 */
export async function runSoak(options: SoakOptions, log: (line: string) => void): Promise<SoakRun[]> {
  const runs: SoakRun[] = [];
  for (const name of options.databases) {
    const systems: readonly SoakSystem[] =
      name === 'PostgreSQL' ? options.systems : options.systems.filter((s) => s === 'asynccmd');
    for (const variant of options.variants) {
      if (systems.length === 0) continue;
      if (name === 'MariaDB' && variant === 'no-autovacuum') {
        log('soak, MariaDB: no-autovacuum skipped (InnoDB purge has no switch to turn it off)');
        continue;
      }
      const t = soakTiming(options.minutes, variant, options.quick);
      const db =
        name === 'PostgreSQL' ? await postgresSoak(variant !== 'no-autovacuum') : await mariadbSoak();
      try {
        log(`soak, ${name}, ${variant}: ${db.server}`);
        const measuredDrain: Partial<Record<SoakSystem, number>> = {};
        let rate = options.rate;
        if (rate === undefined) {
          for (const system of systems) {
            const total = options.quick ? 4_000 : 20_000;
            const r = await runDrain(
              db.drainTarget(system),
              total,
              1,
              CONCURRENCY,
              30_000,
              undefined,
              total / 8,
            );
            measuredDrain[system] = r.rate;
            log(`  soak, ${name}, ${variant}: ${system} drains ${Math.round(r.rate)} jobs/s on this server`);
          }
          rate = Math.round(0.7 * Math.min(...Object.values(measuredDrain)));
        }
        log(`  soak, ${name}, ${variant}: submitting ${rate}/s for ${options.minutes} min`);
        for (const system of systems) {
          const { windows, errors } = await soakOne(db, system, t, rate, log);
          runs.push({
            database: name,
            system,
            label: label(system),
            settings: settings(system, t),
            variant,
            server: db.server,
            deadMeaning: db.deadMeaning,
            timing: t,
            submitRate: rate,
            measuredDrain,
            windows,
            verdicts: [...soakVerdicts(windows, t), ...(variant === 'held' ? heldVerdicts(windows) : [])],
            errors,
          });
          await db.drop(system).catch(() => undefined);
        }
      } finally {
        await db.close();
      }
    }
  }
  return runs;
}
