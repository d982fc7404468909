import { MYSQL_TABLE, seedFinishedMysql, seedPendingMysql } from '../baselines/raw-sql-mysql.js';
import {
  flowUsage,
  MYSQL_USAGE,
  usageSubmit,
  usageTypeLimit,
  usageUpdates,
  type FeatureUsage,
} from './usage.js';
import { effectVerdict, exactlyOnceVerdict } from '../checks.js';
import { createMysqlStore } from '@asynccmd/adapter-mysql';
import type { RowDataPacket } from 'mysql2/promise';
import type { DrainTarget } from '../drain.js';
import { MYSQL_CONFIG, mysqlPool, recreateDatabase } from '../mysql.js';
import {
  BENCH_TYPE,
  EFFECT_TABLE,
  type AsynccmdBenchMode,
  type EffectMode,
  type SystemSpec,
} from '../protocol.js';
import { migrateWith } from './migrate.js';
import { countMysqlAgainst, countMysqlEffects, countMysqlExecutions } from './mysql-verify.js';
import type * as SidequestModule from '../baselines/sidequest.js';

type SidequestBaseline = typeof SidequestModule;

const mysqlStore = (database: string) =>
  createMysqlStore({ connection: { ...MYSQL_CONFIG, database }, connectionLimit: 1 });
const createMysqlTable = (database: string): Promise<void> => migrateWith(() => mysqlStore(database));

/** Databases the MySQL scenarios own; each is dropped and recreated per run. */
export const MYSQL_DATABASES = {
  skipLocked: 'bench_asynccmd_skiplocked',
  legacy: 'bench_asynccmd_legacy',
  raw: 'bench_asynccmd_raw',
  sidequest: 'bench_sidequest',
} as const;

type Pool = ReturnType<typeof mysqlPool>;

/**
 * A drain on asynccmd's table (its own migration) in `database`, consumed by asynccmd with a claim
 * strategy or by the raw-SQL loop, with `finishedRows` SUCCESS rows of history beside the work;
 * with `effect`, beside the application's effect table, checked after the drain.
 */
function mysqlTarget(
  admin: Pool,
  database: string,
  system: string,
  consumer: SystemSpec,
  finishedRows: number,
  usage?: FeatureUsage,
  effect?: EffectMode,
): DrainTarget {
  const inDb = (): Pool => mysqlPool(2, database);
  const withDb = async <T>(fn: (pool: Pool) => Promise<T>): Promise<T> => {
    const pool = inDb();
    try {
      return await fn(pool);
    } finally {
      await pool.end();
    }
  };
  let pool: Pool | null = null;
  return {
    system,
    prepare: async (total, timed) => {
      await recreateDatabase(admin, database);
      await createMysqlTable(database);
      const submit = usageSubmit(usage);
      await withDb(async (p) => {
        await seedFinishedMysql(p, finishedRows);
        await seedPendingMysql(p, BENCH_TYPE, submit === null ? total : total - timed);
        for (const update of usageUpdates(MYSQL_TABLE, usage, MYSQL_USAGE)) await p.query(update);
        if (effect) {
          await p.query(
            `CREATE TABLE ${EFFECT_TABLE} (seq INT NOT NULL, created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB`,
          );
        }
      });
      await submit?.(() => mysqlStore(database), total - timed + 1, timed);
      pool = inDb();
    },
    consumer: (concurrency) => ({ system: consumer, concurrency, recordStarts: false }),
    drained: async () => {
      const [rows] = await (pool as Pool).query<RowDataPacket[]>(
        `SELECT 1 FROM ${MYSQL_TABLE} WHERE status IN ('WAITING', 'PENDING', 'RUNNING') AND type = ? LIMIT 1`,
        [BENCH_TYPE],
      );
      return rows.length === 0;
    },
    verify: async (total, seqs, complete) => {
      const p = pool as Pool;
      pool = null;
      try {
        const check = exactlyOnceVerdict(total, await countMysqlExecutions(p, BENCH_TYPE, seqs), complete);
        if (!effect) return check;
        const counts = await countMysqlEffects(p, BENCH_TYPE);
        return `${check}; ${effectVerdict(total, counts, effect === 'transactional', complete)}`;
      } finally {
        await p.end();
      }
    },
  };
}

/** asynccmd (skip-locked) where each command inserts one row into the effect table (see EffectMode). */
export function asynccmdMysqlEffectTarget(
  admin: Pool,
  effect: EffectMode,
  transactionGroupMs?: number,
): DrainTarget {
  const database = MYSQL_DATABASES.skipLocked;
  return mysqlTarget(
    admin,
    database,
    'asynccmd (skip-locked)',
    {
      kind: 'asynccmd-mysql',
      database,
      claimStrategy: 'skip-locked',
      effect,
      ...(transactionGroupMs === undefined ? {} : { transactionGroupMs }),
    },
    0,
    undefined,
    effect,
  );
}

export function asynccmdMysqlTarget(
  admin: Pool,
  strategy: 'skip-locked' | 'legacy',
  finishedRows: number,
  usage?: FeatureUsage,
  mode?: AsynccmdBenchMode,
): DrainTarget {
  const database = strategy === 'legacy' ? MYSQL_DATABASES.legacy : MYSQL_DATABASES.skipLocked;
  return mysqlTarget(
    admin,
    database,
    `asynccmd (${strategy})`,
    {
      kind: 'asynccmd-mysql',
      database,
      claimStrategy: strategy,
      typeLimit: usageTypeLimit(usage),
      flow: flowUsage(usage),
      mode,
    },
    finishedRows,
    usage,
  );
}

export function rawMysqlTarget(admin: Pool, finishedRows: number, batch: number): DrainTarget {
  const database = MYSQL_DATABASES.raw;
  return mysqlTarget(admin, database, 'raw SQL loop', { kind: 'raw-mysql', database, batch }, finishedRows);
}

/** Loaded on first use: the orchestrator loads Sidequest only when a run needs it. */
const sidequest = (): Promise<SidequestBaseline> => import('../baselines/sidequest.js');

/** Sidequest on its own tables (its migrations) in a database of its own. */
export function sidequestMysqlTarget(admin: Pool, pollMs: number): DrainTarget {
  const database = MYSQL_DATABASES.sidequest;
  let pool: Pool | null = null;
  return {
    system: 'Sidequest',
    prepare: async (total) => {
      await recreateDatabase(admin, database);
      pool = mysqlPool(2, database);
      await (await sidequest()).prepareSidequest(pool, database, total);
    },
    consumer: (concurrency) => ({
      system: { kind: 'sidequest', database, pollMs },
      concurrency,
      recordStarts: false,
    }),
    drained: async () => {
      const [rows] = await (pool as Pool).query<RowDataPacket[]>(
        `SELECT 1 FROM ${(await sidequest()).SIDEQUEST_TABLE} WHERE state IN ('waiting', 'claimed', 'running') LIMIT 1`,
      );
      return rows.length === 0;
    },
    verify: async (total, seqs, complete) => {
      const p = pool as Pool;
      pool = null;
      try {
        const { SIDEQUEST_COMMANDS } = await sidequest();
        return exactlyOnceVerdict(total, await countMysqlAgainst(p, SIDEQUEST_COMMANDS, [], seqs), complete);
      } finally {
        await p.end();
      }
    },
  };
}

/** Empty tables for a latency run: asynccmd's (its migration), or Sidequest's (its migrations). */
export async function freshMysqlTables(admin: Pool, database: string, forSidequest: boolean): Promise<void> {
  await recreateDatabase(admin, database);
  if (!forSidequest) return createMysqlTable(database);
  const pool = mysqlPool(1, database);
  try {
    await (await sidequest()).prepareSidequest(pool, database, 0);
  } finally {
    await pool.end();
  }
}
