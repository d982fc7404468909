import { runDrain, type DrainTarget } from '../drain.js';
import { dropDatabase, mysqlPool } from '../mysql.js';
import type { Measurement } from '../report.js';
import { asynccmdMysqlTarget, MYSQL_DATABASES, rawMysqlTarget } from './mysql-targets.js';
import type { Recorder, Suite } from './recorder.js';
import type { Sizes } from './sizes.js';

const DRAIN = 'MySQL/MariaDB: drain';

type System = 'skip-locked' | 'legacy' | 'raw';

interface DrainRow {
  readonly system: System;
  readonly processes: number;
  readonly history: boolean;
  readonly target: DrainTarget;
  readonly row: Measurement;
}

/**
 * The MySQL/MariaDB scenarios: asynccmd with each claim strategy against the raw SKIP LOCKED loop,
 * on an empty table and beside a history of finished rows, with 1 and with N processes.
 */
export function mysqlSuite(sizes: Sizes, rec: Recorder): Suite {
  const admin = mysqlPool(2);
  const rows: DrainRow[] = [];
  const k = (n: number): string => (n >= 1000 ? `${n / 1000}k` : String(n));
  for (const p of [1, sizes.processes]) {
    const where = `${k(sizes.drainTotal)} × c${sizes.concurrency}, ${p} proc`;
    const history = `${where}, +${k(sizes.finishedRows)} SUCCESS rows`;
    const add = (system: System, label: string, target: DrainTarget, hist = false): void => {
      rows.push({
        system,
        processes: p,
        history: hist,
        target,
        row: rec.row(DRAIN, hist ? history : where, label, 'jobs/s'),
      });
    };
    add('skip-locked', 'asynccmd (skip-locked)', asynccmdMysqlTarget(admin, 'skip-locked', 0));
    add('raw', 'raw SQL loop (SKIP LOCKED)', rawMysqlTarget(admin, 0, sizes.concurrency));
    add('legacy', 'asynccmd (legacy claim)', asynccmdMysqlTarget(admin, 'legacy', 0));
    add(
      'skip-locked',
      'asynccmd (skip-locked)',
      asynccmdMysqlTarget(admin, 'skip-locked', sizes.finishedRows),
      true,
    );
    add('legacy', 'asynccmd (legacy claim)', asynccmdMysqlTarget(admin, 'legacy', sizes.finishedRows), true);
  }
  return {
    name: 'MySQL/MariaDB',
    repeat: async () => {
      for (const d of rows) {
        await rec.throughput(d.row, () =>
          runDrain(d.target, sizes.drainTotal, d.processes, sizes.concurrency, sizes.runTimeoutMs),
        );
      }
    },
    finish: async () => {
      for (const p of [1, sizes.processes]) {
        const of = (system: System, history = false): Measurement =>
          (rows.find((d) => d.processes === p && d.system === system && d.history === history) as DrainRow)
            .row;
        const procs = `${p} process${p > 1 ? 'es' : ''}`;
        rec.ratio(DRAIN, `asynccmd skip-locked / raw SQL loop, ${procs}`, of('skip-locked'), of('raw'), {
          atLeast: 0.8,
        });
        rec.ratio(
          DRAIN,
          `asynccmd skip-locked with history / empty, ${procs}`,
          of('skip-locked', true),
          of('skip-locked'),
          {
            atLeast: 0.8,
          },
        );
        rec.ratio(DRAIN, `asynccmd legacy / raw SQL loop, ${procs}`, of('legacy'), of('raw'), {});
        rec.ratio(
          DRAIN,
          `asynccmd legacy with history / empty, ${procs}`,
          of('legacy', true),
          of('legacy'),
          {},
        );
      }
      for (const database of Object.values(MYSQL_DATABASES))
        await dropDatabase(admin, database).catch(() => undefined);
      await admin.end();
    },
  };
}
