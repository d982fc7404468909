import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { openSqlite, seedPendingSqlite, SQLITE_TABLE } from '../baselines/raw-sql-sqlite.js';
import { countEffects, countExecutions, effectVerdict, exactlyOnceVerdict } from '../checks.js';
import type { DrainTarget } from '../drain.js';
import {
  FEATURE_USAGES,
  flowRatios,
  flowUsage,
  SQLITE_USAGE,
  usageSettings,
  usageTotal,
  usageTypeLimit,
  usageSubmit,
  workflowRatios,
  usageUpdates,
  type FeatureUsage,
  type FeatureUsageKey,
} from './usage.js';
import { latencyInRounds, type LatencyTarget } from '../latency.js';
import { BENCH_TYPE, EFFECT_TABLE, type EffectMode, type SystemSpec } from '../protocol.js';
import type { Measurement } from '../report.js';
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
import { migrateWith } from './migrate.js';
import type { Recorder, Suite } from './recorder.js';
import type { Scenario, Sizes } from './sizes.js';

const DRAIN = 'SQLite: drain';
const EFFECTS = 'SQLite: drain, one effect row per command';
const CPU_NOTE = 'DB CPU µs/cmd: — (SQLite runs inside the consumer: its CPU is in CPU µs/cmd)';
const LATENCY = 'SQLite: commit → start latency';

/** A database file of its own, created by asynccmd's migration (every earlier file removed). */
async function freshFile(filename: string): Promise<void> {
  for (const suffix of ['', '-wal', '-shm']) rmSync(filename + suffix, { force: true });
  await migrateWith(() => createSqliteStore({ filename }));
}

/** With `effect`, beside the application's effect table in the same file, checked after the drain. */
function sqliteDrainTarget(
  filename: string,
  system: string,
  consumer: SystemSpec,
  usage?: FeatureUsage,
  effect?: EffectMode,
): DrainTarget {
  let db: ReturnType<typeof openSqlite> | null = null;
  return {
    system,
    prepare: async (total, timed) => {
      await freshFile(filename);
      db = openSqlite(filename);
      const submit = usageSubmit(usage);
      seedPendingSqlite(db, BENCH_TYPE, submit === null ? total : total - timed);
      for (const update of usageUpdates(SQLITE_TABLE, usage, SQLITE_USAGE)) db.exec(update);
      await submit?.(() => createSqliteStore({ filename }), total - timed + 1, timed);
      if (effect)
        db.exec(
          `CREATE TABLE ${EFFECT_TABLE} (seq INTEGER NOT NULL, created_at INTEGER NOT NULL DEFAULT (unixepoch('subsec') * 1000))`,
        );
    },
    consumer: (concurrency) => ({ system: consumer, concurrency, recordStarts: false }),
    drained: async () =>
      db!
        .prepare(
          `SELECT 1 FROM ${SQLITE_TABLE} WHERE type = ? AND status IN ('WAITING', 'PENDING', 'RUNNING') LIMIT 1`,
        )
        .get(BENCH_TYPE) === undefined,
    verify: async (total, seqs, complete) => {
      const rows = db!
        .prepare<[string, string], { seq: number; status: string }>(
          `SELECT json_extract(payload, '$.seq') AS seq, status FROM ${SQLITE_TABLE} WHERE type = ?
           UNION ALL
           SELECT json_extract(payload, '$.seq') AS seq, status FROM ${SQLITE_TABLE}_history WHERE type = ?`,
        )
        .all(BENCH_TYPE, BENCH_TYPE);
      const effectSeqs = effect
        ? db!
            .prepare<[], { seq: number }>(`SELECT seq FROM ${EFFECT_TABLE}`)
            .all()
            .map((r) => r.seq)
        : [];
      db!.close();
      db = null;
      const check = exactlyOnceVerdict(total, countExecutions(rows, seqs), complete);
      if (!effect) return check;
      const counts = countEffects(rows, effectSeqs);
      return `${check}; ${effectVerdict(total, counts, effect === 'transactional', complete)}`;
    },
  };
}

/**
 * The SQLite scenarios, on a file in a temporary directory: asynccmd against the raw batch-500
 * loop, and commit → start latency from another process. Sidequest's SQLite backend is measured
 * when it is installed; it is not a dependency of the bench (see docs/performance.md).
 */
export function sqliteSuite(sizes: Sizes, rec: Recorder, scenarios: ReadonlySet<Scenario>): Suite {
  const dir = mkdtempSync(join(tmpdir(), 'asynccmd-bench-sqlite-'));
  const ours = join(dir, 'asynccmd.db');
  const raw = join(dir, 'raw.db');
  const batch = sizes.rawBatch;
  const store = 'store { filename } (WAL, busy_timeout 5000, synchronous NORMAL)';
  const defaults = `executor mode ASYNC_POOL; runtime defaults: sharedPool { concurrency: C }; ${store}`;
  const drains = scenarios.has('drain')
    ? drainRows<'asynccmd' | 'raw-batch' | 'scheduled' | FeatureUsageKey>(
        rec,
        DRAIN,
        sizes,
        sizes.sqliteShapes,
        'never analyzed',
        () => [
          [
            'asynccmd',
            'asynccmd defaults',
            defaults,
            sqliteDrainTarget(ours, 'asynccmd', { kind: 'asynccmd-sqlite', filename: ours }),
            false,
          ],
          [
            'raw-batch',
            `raw SQL loop, batch ${batch}`,
            `UPDATE … WHERE id IN (SELECT … ORDER BY next_run_at, id LIMIT ${batch}) RETURNING, then one token-fenced UPDATE completes the batch; same pragmas`,
            sqliteDrainTarget(raw, 'raw SQL loop', { kind: 'raw-sqlite', filename: raw, batch }),
            false,
          ],
          [
            'scheduled',
            SCHEDULED_LABEL,
            `${SCHEDULED_SETTINGS}; ${store}`,
            sqliteDrainTarget(ours, 'asynccmd', {
              kind: 'asynccmd-sqlite',
              filename: ours,
              mode: 'SCHEDULED',
            }),
            false,
          ],
          ...FEATURE_USAGES.map(
            ([usage, key]) =>
              [
                key,
                `asynccmd, ${usage} in use`,
                usageSettings(usage),
                sqliteDrainTarget(
                  ours,
                  'asynccmd',
                  {
                    kind: 'asynccmd-sqlite',
                    filename: ours,
                    typeLimit: usageTypeLimit(usage),
                    flow: flowUsage(usage),
                  },
                  usage,
                ),
                false,
                usageTotal(usage, sizes),
              ] as const,
          ),
        ],
      )
    : [];
  const effects = scenarios.has('effects')
    ? drainRows<EffectSystem>(rec, EFFECTS, sizes, sizes.effectShapes, 'never analyzed', (shape) => {
        const consumer = (effect: EffectMode, transactionGroupMs?: number): SystemSpec => ({
          kind: 'asynccmd-sqlite',
          filename: ours,
          effect,
          ...(transactionGroupMs === undefined ? {} : { transactionGroupMs }),
        });
        const entries: PlanEntry<EffectSystem>[] = [];
        if (findRow(drains, 'asynccmd', shape) === undefined)
          entries.push([
            'noop',
            NOOP_LABEL,
            noopSettings(defaults),
            sqliteDrainTarget(ours, 'asynccmd', { kind: 'asynccmd-sqlite', filename: ours }),
            false,
          ]);
        entries.push(
          [
            'transactional',
            TRANSACTIONAL_LABEL,
            transactionalSettings(
              `${store}: one writer, so one transactional attempt at a time (BEGIN IMMEDIATE), C does not apply to them`,
              "the store's one connection",
            ),
            sqliteDrainTarget(ours, 'asynccmd', consumer('transactional'), undefined, 'transactional'),
            false,
          ],
          [
            'transactional-tuned',
            TUNED_TRANSACTIONAL_LABEL,
            tunedTransactionalSettings(),
            sqliteDrainTarget(
              ours,
              'asynccmd',
              consumer('transactional', TUNED_GROUP_MS),
              undefined,
              'transactional',
            ),
            false,
          ],
          [
            'own-transaction',
            OWN_TRANSACTION_LABEL,
            ownTransactionSettings(store, 'on a second connection to the file (same pragmas)'),
            sqliteDrainTarget(ours, 'asynccmd', consumer('own-transaction'), undefined, 'own-transaction'),
            false,
          ],
        );
        return entries;
      })
    : [];
  const lat = scenarios.has('latency')
    ? rec.row(
        LATENCY,
        `1 submit / ${sizes.latencyIntervalMs} ms from another process`,
        'asynccmd defaults',
        'ms',
        defaults + '; consumer C=10',
      )
    : null;
  const latencyTarget: LatencyTarget = {
    system: 'asynccmd',
    prepare: () => freshFile(ours),
    consumer: { system: { kind: 'asynccmd-sqlite', filename: ours }, concurrency: 10, recordStarts: true },
    submitter: { kind: 'asynccmd-sqlite', filename: ours },
  };
  let noted = false;
  return {
    name: 'SQLite',
    repeat: async () => {
      if (!noted) {
        noted = true;
        if (effects.length > 0) rec.note(EFFECTS, CPU_NOTE);
        for (const section of [drains.length > 0 ? DRAIN : null, lat ? LATENCY : null])
          if (section) {
            rec.note(
              section,
              'no Sidequest row: @sidequest/sqlite-backend does not install (see docs/performance.md)',
            );
            rec.note(section, CPU_NOTE);
          }
      }
      await runDrainRows(rec, sizes, interleaveByShape<DrainRow<string>>(drains, effects));
      if (lat) {
        const [result] = await latencyInRounds([latencyTarget], sizes);
        await rec.latency(lat, async () => (await result!).fromCommit);
      }
    },
    finish: async () => {
      flowRatios(rec, DRAIN, drains, 'asynccmd', 'asynccmd defaults');
      for (const shape of shapesOf(drains)) {
        const raw: Measurement | undefined = findRow(drains, 'raw-batch', shape);
        for (const [system, label] of [
          ['asynccmd', 'asynccmd defaults'],
          ['scheduled', 'asynccmd default mode (SCHEDULED)'],
        ] as const) {
          const ours: Measurement | undefined = findRow(drains, system, shape);
          if (ours && raw)
            rec.ratio(DRAIN, `${label} / raw batch-${batch} loop, ${shapeLabel(shape)}`, ours, raw, {
              atLeast: 0.8,
            });
        }
        // For information: the target is PostgreSQL's.
        workflowRatios(
          rec,
          DRAIN,
          shapeLabel(shape),
          (key) => findRow(drains, key, shape),
          findRow(drains, 'asynccmd', shape),
          'asynccmd defaults',
          false,
        );
      }
      // For information: the targets are PostgreSQL's.
      effectRatios(
        rec,
        EFFECTS,
        effects,
        (shape) => findRow(drains, 'asynccmd', shape),
        () => false,
      );
      // Sidequest's SQLite p99 is not measured here; the bound is the one its MariaDB figure sets.
      if (lat) rec.bound(LATENCY, 'asynccmd cross-process p99', lat, { atMost: 30 });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
