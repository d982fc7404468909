import { dropDatabase, mysqlPool } from '../mysql.js';
import { drainRows, processesLabel, rowOf, runDrainRows } from './drain-rows.js';
import { asynccmdMysqlTarget, MYSQL_DATABASES, rawMysqlTarget } from './mysql-targets.js';
import type { Recorder, Suite } from './recorder.js';
import type { Sizes } from './sizes.js';

const DRAIN = 'MySQL/MariaDB: drain';

/**
 * The MySQL/MariaDB scenarios: asynccmd with each claim strategy against the raw SKIP LOCKED loop,
 * on an empty table and beside a history of finished rows, with 1 and with N processes.
 */
export function mysqlSuite(sizes: Sizes, rec: Recorder): Suite {
  const admin = mysqlPool(2);
  const skip = 'asynccmd (skip-locked)';
  const legacy = 'asynccmd (legacy claim)';
  const drains = drainRows(rec, DRAIN, sizes, () => [
    ['skip-locked', skip, asynccmdMysqlTarget(admin, 'skip-locked', 0), false],
    ['raw', 'raw SQL loop (SKIP LOCKED)', rawMysqlTarget(admin, 0, sizes.concurrency), false],
    ['legacy', legacy, asynccmdMysqlTarget(admin, 'legacy', 0), false],
    ['skip-locked', skip, asynccmdMysqlTarget(admin, 'skip-locked', sizes.finishedRows), true],
    ['legacy', legacy, asynccmdMysqlTarget(admin, 'legacy', sizes.finishedRows), true],
  ]);
  return {
    name: 'MySQL/MariaDB',
    repeat: () => runDrainRows(rec, sizes, drains),
    finish: async () => {
      for (const p of [1, sizes.processes]) {
        const procs = processesLabel(p);
        const raw = rowOf(drains, 'raw', p);
        for (const strategy of ['skip-locked', 'legacy'] as const) {
          // Targets apply to the strategy servers with SKIP LOCKED use; legacy is shown beside it.
          const target = strategy === 'skip-locked' ? { atLeast: 0.8 } : {};
          const empty = rowOf(drains, strategy, p);
          rec.ratio(DRAIN, `asynccmd ${strategy} / raw SQL loop, ${procs}`, empty, raw, target);
          rec.ratio(
            DRAIN,
            `asynccmd ${strategy} with history / empty, ${procs}`,
            rowOf(drains, strategy, p, true),
            empty,
            target,
          );
        }
      }
      for (const database of Object.values(MYSQL_DATABASES))
        await dropDatabase(admin, database).catch(() => undefined);
      await admin.end();
    },
  };
}
