import { claimLoop, overlappingClaimLoop } from '../baselines/claim-loop.js';
import { claimLayoutBatch, LEAN_LAYOUT } from '../baselines/layouts-pg.js';
import { claimPgBatch } from '../baselines/raw-sql-pg.js';
import { claimMysqlBatch } from '../baselines/raw-sql-mysql.js';
import { mysqlPool } from '../mysql.js';
import { pgPool } from '../pg.js';
import { BENCH_TYPE, type BenchPayload, type ConsumerSpec } from '../protocol.js';

/** A queue consumer inside a child: connected by `prepare`, consuming after `go`, drained by `stop`. */
export interface Consumer {
  go(): Promise<void>;
  stop(): Promise<void>;
  /** What the system did, for reading the figures (e.g. rows claimed per poll round). */
  diagnostics?(): string;
}

export type OnExecute = (payload: BenchPayload) => void;

export async function prepareConsumer(spec: ConsumerSpec, onExecute: OnExecute): Promise<Consumer> {
  const system = spec.system;
  switch (system.kind) {
    case 'raw-pg': {
      if (system.effect === 'transactional') {
        const { rawEffectLoop } = await import('../baselines/raw-effect-pg.js');
        return loopConsumer(
          (stopped) => rawEffectLoop(system.schema, spec.concurrency, system.batch, onExecute, stopped),
          async () => undefined,
        );
      }
      const pool = pgPool(2, true);
      await pool.query('SELECT 1');
      return loopConsumer(
        (stopped) => claimLoop(() => claimPgBatch(pool, system.schema, system.batch), onExecute, stopped),
        () => pool.end(),
      );
    }
    case 'lean-pg': {
      const pool = pgPool(2, true);
      await Promise.all([pool.query('SELECT 1'), pool.query('SELECT 1')]);
      return loopConsumer(
        (stopped) =>
          overlappingClaimLoop(
            () => claimLayoutBatch(LEAN_LAYOUT, pool, system.schema, system.batch),
            onExecute,
            stopped,
          ),
        () => pool.end(),
      );
    }
    case 'raw-mysql': {
      const pool = mysqlPool(2, system.database);
      await pool.query('SELECT 1');
      return loopConsumer(
        (stopped) => claimLoop(() => claimMysqlBatch(pool, BENCH_TYPE, system.batch), onExecute, stopped),
        () => pool.end(),
      );
    }
    case 'raw-sqlite': {
      const { claimSqliteBatch, openSqlite } = await import('../baselines/raw-sql-sqlite.js');
      const db = openSqlite(system.filename);
      return loopConsumer(
        (stopped) =>
          claimLoop(async () => claimSqliteBatch(db, BENCH_TYPE, system.batch), onExecute, stopped),
        async () => {
          db.close();
        },
      );
    }
    case 'graphile': {
      const { runGraphile } = await import('../baselines/graphile.js');
      return startedOnGo(() =>
        runGraphile(system.schema, spec.concurrency, system.performance, onExecute, system.effect === true),
      );
    }
    case 'pg-boss': {
      const { runPgBoss } = await import('../baselines/pg-boss.js');
      return startedOnGo(() =>
        runPgBoss(system.schema, spec.concurrency, system.batchSize, onExecute, system.maintained === true),
      );
    }
    case 'sidequest': {
      const { runSidequest } = await import('../baselines/sidequest.js');
      return startedOnGo(() => runSidequest(system.database, spec.concurrency, system.pollMs, onExecute));
    }
    case 'asynccmd-pg':
    case 'asynccmd-mysql':
    case 'asynccmd-sqlite': {
      // Loaded only here, so a baseline's child never loads asynccmd's packages (nor breaks with them).
      const { benchRuntime, openStore } = await import('./asynccmd.js');
      const { effectExecutor, storeConnections } = await import('./effects.js');
      const effect = system.effect;
      const writer =
        effect === undefined
          ? null
          : await effectExecutor({ ...system, effect }, spec.concurrency, onExecute);
      const store = await openStore(system, storeConnections(system, spec.concurrency));
      // Unset: the runtime's default, a queue that follows the backlog.
      const queueSize = system.kind === 'asynccmd-pg' ? system.queueSize : undefined;
      const runtime = benchRuntime(
        store,
        { concurrency: spec.concurrency, ...(queueSize === undefined ? {} : { queueSize }) },
        writer?.executor ?? { mode: system.mode ?? 'ASYNC_POOL', onExecute },
        system.typeLimit,
        system.kind === 'asynccmd-sqlite' ? undefined : system.retention,
        system.flow,
        system.transactionGroupMs === undefined ? {} : { transactionGroupMs: system.transactionGroupMs },
      );
      let rounds = 0;
      let claimingRounds = 0;
      let claimed = 0;
      // Rounds only: a listener of every kind would have the runtime build every command's events.
      runtime.events.onKind('round', (event) => {
        rounds++;
        if (event.claimed > 0) claimingRounds++;
        claimed += event.claimed;
      });
      return {
        go: async () => runtime.start(),
        stop: async () => {
          await runtime.stop();
          await writer?.close();
        },
        diagnostics: () =>
          `${rounds} poll rounds, ${(claimed / Math.max(1, claimingRounds)).toFixed(1)} rows per claiming round`,
      };
    }
    default:
      throw new Error(`no consumer for ${JSON.stringify(system satisfies never)}`);
  }
}

/** A peer's worker, started on go (its startup is its first claim) and stopped gracefully. */
function startedOnGo(start: () => Promise<{ stop(): Promise<void> }>): Consumer {
  let runner: { stop(): Promise<void> } | undefined;
  return {
    go: async () => {
      runner = await start();
    },
    stop: async () => {
      await runner?.stop();
    },
  };
}

/** A consumer that runs `loop` from go until stop, then closes its connections. */
function loopConsumer(loop: (stopped: () => boolean) => Promise<void>, close: () => Promise<void>): Consumer {
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  return {
    go: async () => {
      running = loop(() => stopped);
    },
    stop: async () => {
      stopped = true;
      await running;
      await close();
    },
  };
}
