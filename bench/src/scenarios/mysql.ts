import { sidequestSettings } from '../baselines/sidequest-settings.js';
import { latencyInRounds, type LatencyTarget } from '../latency.js';
import { dropDatabase, mysqlPool } from '../mysql.js';
import type { Measurement } from '../report.js';
import { mysqlServerCpu, serverCpuOnce } from '../server-cpu.js';
import type { Target } from '../stats.js';
import { peer } from '../versions.js';
import {
  FEATURE_USAGES,
  flowRatios,
  usageSettings,
  usageTotal,
  workflowRatios,
  type FeatureUsageKey,
} from './usage.js';
import {
  effectRatios,
  NOOP_LABEL,
  noopSettings,
  OWN_TRANSACTION_LABEL,
  ownTransactionSettings,
  TRANSACTIONAL_LABEL,
  transactionalSettings,
  TUNED_GROUP_MS,
  TUNED_TRANSACTIONAL_LABEL,
  tunedTransactionalSettings,
  type EffectSystem,
} from './effects.js';
import {
  drainRows,
  findRow,
  interleaveByShape,
  runDrainRows,
  SCHEDULED_LABEL,
  SCHEDULED_SETTINGS,
  shapeLabel,
  shapesOf,
  type DrainRow,
  type PlanEntry,
} from './drain-rows.js';
import {
  asynccmdMysqlEffectTarget,
  asynccmdMysqlTarget,
  freshMysqlTables,
  MYSQL_DATABASES,
  rawMysqlTarget,
  sidequestMysqlTarget,
} from './mysql-targets.js';
import type { Recorder, Suite } from './recorder.js';
import type { Scenario, Sizes } from './sizes.js';

const DRAIN = 'MySQL/MariaDB: drain';
const EFFECTS = 'MySQL/MariaDB: drain, one effect row per command';
const LATENCY = 'MySQL/MariaDB: commit → start latency';

type MysqlDrainSystem =
  'skip-locked' | 'legacy' | 'raw-batch' | 'raw-c' | 'sidequest' | 'scheduled' | FeatureUsageKey;

const ASYNCCMD = (strategy: string): string =>
  `executor mode ASYNC_POOL; runtime defaults: sharedPool { concurrency: C }; store claimStrategy '${strategy}'`;

/**
 * The MySQL/MariaDB scenarios: asynccmd with each claim strategy against the raw batch-500 loop
 * and Sidequest, on an empty table and beside a history of finished rows; and commit → start
 * latency from another process, asynccmd against Sidequest.
 */
export function mysqlSuite(sizes: Sizes, rec: Recorder, scenarios: ReadonlySet<Scenario>): Suite {
  const admin = mysqlPool(2);
  const skip = 'asynccmd (skip-locked)';
  const legacy = 'asynccmd (legacy claim)';
  const sq = `${peer('sidequest')} + ${peer('@sidequest/mysql-backend')}`;
  const batch = sizes.rawBatch;
  const drains = scenarios.has('drain')
    ? drainRows<MysqlDrainSystem>(rec, DRAIN, sizes, sizes.mysqlShapes, 'no ANALYZE run', (shape) => {
        const entries: PlanEntry<MysqlDrainSystem>[] = [
          ['skip-locked', skip, ASYNCCMD('skip-locked'), asynccmdMysqlTarget(admin, 'skip-locked', 0), false],
          [
            'raw-batch',
            `raw SQL loop, batch ${batch}`,
            `two-step token claim (SELECT … LIMIT ${batch} FOR UPDATE SKIP LOCKED, UPDATE … SET claim_token; then SELECT by token), one fenced UPDATE completes the batch`,
            rawMysqlTarget(admin, 0, batch),
            false,
          ],
          [
            'raw-c',
            'raw SQL loop, batch C',
            'as the batch-500 loop, claiming C rows at a time',
            rawMysqlTarget(admin, 0, shape.concurrency),
            false,
          ],
          ['legacy', legacy, ASYNCCMD('legacy'), asynccmdMysqlTarget(admin, 'legacy', 0), false],
          [
            'sidequest',
            sq,
            sidequestSettings(sizes.sidequestPollMs),
            sidequestMysqlTarget(admin, sizes.sidequestPollMs),
            false,
          ],
        ];
        // One at a time, whatever C: beside the first one-process shape.
        if (shape === sizes.mysqlShapes.find((s) => s.processes === 1)) {
          entries.push([
            'scheduled',
            `${SCHEDULED_LABEL}, skip-locked`,
            `${SCHEDULED_SETTINGS}; store claimStrategy 'skip-locked'`,
            asynccmdMysqlTarget(admin, 'skip-locked', 0, undefined, 'SCHEDULED'),
            false,
          ]);
        }
        if (shape.concurrency === sizes.concurrency) {
          for (const [usage, key] of FEATURE_USAGES)
            entries.push([
              key,
              `${skip}, ${usage} in use`,
              usageSettings(usage),
              asynccmdMysqlTarget(admin, 'skip-locked', 0, usage),
              false,
              usageTotal(usage, sizes),
            ]);
          const history = sizes.finishedRows;
          entries.push(
            [
              'skip-locked',
              skip,
              ASYNCCMD('skip-locked'),
              asynccmdMysqlTarget(admin, 'skip-locked', history),
              true,
            ],
            ['legacy', legacy, ASYNCCMD('legacy'), asynccmdMysqlTarget(admin, 'legacy', history), true],
          );
        }
        return entries;
      })
    : [];
  const effects = scenarios.has('effects')
    ? drainRows<EffectSystem>(rec, EFFECTS, sizes, sizes.effectShapes, 'no ANALYZE run', (shape) => {
        const store = "store claimStrategy 'skip-locked', store defaults";
        const entries: PlanEntry<EffectSystem>[] = [];
        if (findRow(drains, 'skip-locked', shape) === undefined)
          entries.push([
            'noop',
            `${NOOP_LABEL} (skip-locked)`,
            noopSettings(ASYNCCMD('skip-locked')),
            asynccmdMysqlTarget(admin, 'skip-locked', 0),
            false,
          ]);
        entries.push(
          [
            'transactional',
            TRANSACTIONAL_LABEL,
            transactionalSettings(store),
            asynccmdMysqlEffectTarget(admin, 'transactional'),
            false,
          ],
          [
            'transactional-tuned',
            TUNED_TRANSACTIONAL_LABEL,
            tunedTransactionalSettings(),
            asynccmdMysqlEffectTarget(admin, 'transactional', TUNED_GROUP_MS),
            false,
          ],
          [
            'own-transaction',
            OWN_TRANSACTION_LABEL,
            ownTransactionSettings(store),
            asynccmdMysqlEffectTarget(admin, 'own-transaction'),
            false,
          ],
        );
        return entries;
      })
    : [];
  const paced = `1 submit / ${sizes.latencyIntervalMs} ms from another process`;
  const lat = scenarios.has('latency')
    ? {
        asynccmd: rec.row(LATENCY, paced, skip, 'ms', ASYNCCMD('skip-locked') + '; consumer C=10'),
        sidequest: rec.row(
          LATENCY,
          paced,
          sq,
          'ms',
          sidequestSettings(sizes.sidequestPollMs) + '; consumer C=10, enqueue() in the submitter',
        ),
      }
    : null;
  const latencyTargets = (): [Measurement, LatencyTarget][] => {
    const ours = MYSQL_DATABASES.skipLocked;
    const theirs = MYSQL_DATABASES.sidequest;
    return [
      [
        lat!.asynccmd,
        {
          system: skip,
          prepare: () => freshMysqlTables(admin, ours, false),
          consumer: {
            system: { kind: 'asynccmd-mysql', database: ours, claimStrategy: 'skip-locked' },
            concurrency: 10,
            recordStarts: true,
          },
          submitter: { kind: 'asynccmd-mysql', database: ours, claimStrategy: 'skip-locked' },
        },
      ],
      [
        lat!.sidequest,
        {
          system: sq,
          prepare: () => freshMysqlTables(admin, theirs, true),
          consumer: {
            system: { kind: 'sidequest', database: theirs, pollMs: sizes.sidequestPollMs },
            concurrency: 10,
            recordStarts: true,
          },
          submitter: { kind: 'sidequest', database: theirs, pollMs: sizes.sidequestPollMs },
        },
      ],
    ];
  };
  const serverCpu = serverCpuOnce(
    () => mysqlServerCpu(admin),
    (why) => {
      for (const section of [
        drains.length > 0 ? DRAIN : null,
        effects.length > 0 ? EFFECTS : null,
        lat ? LATENCY : null,
      ])
        if (section) rec.note(section, `DB CPU µs/cmd not measured: ${why}`);
    },
  );
  return {
    name: 'MySQL/MariaDB',
    repeat: async () => {
      const server = await serverCpu();
      await runDrainRows(rec, sizes, interleaveByShape<DrainRow<string>>(drains, effects), server);
      if (lat) {
        const targets = latencyTargets();
        const results = await latencyInRounds(
          targets.map(([, target]) => target),
          sizes,
          server,
        );
        for (const [i, [row]] of targets.entries()) {
          await rec.latency(row, async () => (await results[i]!).fromCommit);
        }
      }
    },
    finish: async () => {
      flowRatios(rec, DRAIN, drains, 'skip-locked', skip);
      for (const shape of shapesOf(drains)) {
        const at = shapeLabel(shape);
        const ratio = (
          label: string,
          a: Measurement | undefined,
          b: Measurement | undefined,
          t: Target,
        ): void => {
          if (a && b) rec.ratio(DRAIN, `${label}, ${at}`, a, b, t);
        };
        const raw = findRow(drains, 'raw-batch', shape);
        const sidequest = findRow(drains, 'sidequest', shape);
        for (const strategy of ['skip-locked', 'legacy'] as const) {
          // Targets apply to the strategy servers with SKIP LOCKED use; legacy is shown beside it.
          const target = (t: Target): Target => (strategy === 'skip-locked' ? t : {});
          const empty = findRow(drains, strategy, shape);
          ratio(`asynccmd ${strategy} / raw batch-${batch} loop`, empty, raw, target({ atLeast: 0.8 }));
          ratio(`asynccmd ${strategy} / Sidequest`, empty, sidequest, target({ atLeast: 30 }));
          ratio(
            `asynccmd ${strategy} with history / empty`,
            findRow(drains, strategy, shape, true),
            empty,
            target({ atLeast: 0.8 }),
          );
        }
        const scheduled = findRow(drains, 'scheduled', shape);
        ratio(`asynccmd default mode (SCHEDULED) / raw batch-${batch} loop`, scheduled, raw, {
          atLeast: 0.8,
        });
        ratio('asynccmd default mode (SCHEDULED) / Sidequest', scheduled, sidequest, { atLeast: 30 });
        ratio('raw batch-C loop / raw batch-500 loop', findRow(drains, 'raw-c', shape), raw, {});
        // For information: the target is PostgreSQL's.
        workflowRatios(
          rec,
          DRAIN,
          at,
          (key) => findRow(drains, key, shape),
          findRow(drains, 'skip-locked', shape),
          'asynccmd skip-locked',
          false,
        );
      }
      // For information: the targets are PostgreSQL's.
      effectRatios(
        rec,
        EFFECTS,
        effects,
        (shape) => findRow(drains, 'skip-locked', shape),
        () => false,
      );
      if (lat) {
        rec.ratio(LATENCY, 'asynccmd p99 / Sidequest p99 (lower is better)', lat.asynccmd, lat.sidequest, {
          atMost: 0.5,
        });
      }
      for (const database of Object.values(MYSQL_DATABASES))
        await dropDatabase(admin, database).catch(() => undefined);
      await admin.end();
    },
  };
}
