import { claimLoop } from '../baselines/claim-loop.js';
import { claimPgBatch } from '../baselines/raw-sql-pg.js';
import { runGraphile } from '../baselines/graphile.js';
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
      const pool = pgPool(2, true);
      await pool.query('SELECT 1');
      return loopConsumer(
        (stopped) => claimLoop(() => claimPgBatch(pool, system.schema, system.batch), onExecute, stopped),
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
    case 'graphile': {
      let runner: Awaited<ReturnType<typeof runGraphile>> | undefined;
      return {
        go: async () => {
          runner = await runGraphile(system.schema, spec.concurrency, onExecute);
        },
        stop: async () => {
          await runner?.stop();
        },
      };
    }
    case 'asynccmd-pg':
    case 'asynccmd-mysql': {
      // Loaded only here, so a baseline's child never loads asynccmd's packages (nor breaks with them).
      const { benchRuntime, openStore } = await import('./asynccmd.js');
      const store = await openStore(system, 4);
      const queueSize = system.kind === 'asynccmd-pg' ? (system.queueSize ?? 0) : 0;
      const runtime = benchRuntime(
        store,
        { concurrency: spec.concurrency, queueSize },
        { mode: 'ASYNC_POOL', onExecute },
      );
      let rounds = 0;
      let claimingRounds = 0;
      let claimed = 0;
      runtime.on((event) => {
        if (event.kind !== 'round') return;
        rounds++;
        if (event.claimed > 0) claimingRounds++;
        claimed += event.claimed;
      });
      return {
        go: async () => runtime.start(),
        stop: () => runtime.stop(),
        diagnostics: () =>
          `${rounds} poll rounds, ${(claimed / Math.max(1, claimingRounds)).toFixed(1)} rows per claiming round`,
      };
    }
    default:
      throw new Error(`no consumer for ${JSON.stringify(system satisfies never)}`);
  }
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
