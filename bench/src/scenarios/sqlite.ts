import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { openSqlite, seedPendingSqlite, SQLITE_TABLE } from '../baselines/raw-sql-sqlite.js';
import { countExecutions, exactlyOnceVerdict } from '../checks.js';
import type { DrainTarget } from '../drain.js';
import {
  FEATURE_USAGES,
  usageSettings,
  usageTypeLimit,
  usageUpdate,
  type FeatureUsage,
  type FeatureUsageKey,
} from './usage.js';
import { latencyInRounds, type LatencyTarget } from '../latency.js';
import { BENCH_TYPE, type SystemSpec } from '../protocol.js';
import type { Measurement } from '../report.js';
import {
  drainRows,
  findRow,
  runDrainRows,
  SCHEDULED_LABEL,
  SCHEDULED_SETTINGS,
  shapeLabel,
  shapesOf,
} from './drain-rows.js';
import { migrateWith } from './migrate.js';
import type { Recorder, Suite } from './recorder.js';
import type { Scenario, Sizes } from './sizes.js';

const DRAIN = 'SQLite: drain';
const LATENCY = 'SQLite: commit → start latency';

/** A database file of its own, created by asynccmd's migration (every earlier file removed). */
async function freshFile(filename: string): Promise<void> {
  for (const suffix of ['', '-wal', '-shm']) rmSync(filename + suffix, { force: true });
  await migrateWith(() => createSqliteStore({ filename }));
}

function sqliteDrainTarget(
  filename: string,
  system: string,
  consumer: SystemSpec,
  usage?: FeatureUsage,
): DrainTarget {
  let db: ReturnType<typeof openSqlite> | null = null;
  return {
    system,
    prepare: async (total) => {
      await freshFile(filename);
      db = openSqlite(filename);
      seedPendingSqlite(db, BENCH_TYPE, total);
      const update = usageUpdate(SQLITE_TABLE, usage, (a, b) => `${a} || (${b})`);
      if (update) db.exec(update);
    },
    consumer: (concurrency) => ({ system: consumer, concurrency, recordStarts: false }),
    drained: async () =>
      db!
        .prepare(`SELECT 1 FROM ${SQLITE_TABLE} WHERE type = ? AND status IN ('PENDING', 'RUNNING') LIMIT 1`)
        .get(BENCH_TYPE) === undefined,
    verify: async (total, seqs, complete) => {
      const rows = db!
        .prepare<[string], { seq: number; status: string }>(
          `SELECT json_extract(payload, '$.seq') AS seq, status FROM ${SQLITE_TABLE} WHERE type = ?`,
        )
        .all(BENCH_TYPE);
      db!.close();
      db = null;
      return exactlyOnceVerdict(total, countExecutions(rows, seqs), complete);
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
                  { kind: 'asynccmd-sqlite', filename: ours, typeLimit: usageTypeLimit(usage) },
                  usage,
                ),
                false,
              ] as const,
          ),
        ],
      )
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
        for (const section of [drains.length > 0 ? DRAIN : null, lat ? LATENCY : null])
          if (section) {
            rec.note(
              section,
              'no Sidequest row: @sidequest/sqlite-backend does not install (see docs/performance.md)',
            );
            rec.note(section, 'DB CPU µs/cmd: — (SQLite runs inside the consumer: its CPU is in CPU µs/cmd)');
          }
      }
      await runDrainRows(rec, sizes, drains);
      if (lat) {
        const [result] = await latencyInRounds([latencyTarget], sizes);
        await rec.latency(lat, async () => (await result!).fromCommit);
      }
    },
    finish: async () => {
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
      }
      // Sidequest's SQLite p99 is not measured here; the bound is the one its MariaDB figure sets.
      if (lat) rec.bound(LATENCY, 'asynccmd cross-process p99', lat, { atMost: 30 });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
