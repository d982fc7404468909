import { latencyInRounds, runImmediateLatency, type StartLatency } from '../latency.js';
import { runDrain } from '../drain.js';
import type { Measurement } from '../report.js';
import { dropSchema, pgPool } from '../pg.js';
import { runSubmits, type SubmitTarget } from '../submits.js';
import type { Pool } from 'pg';
import { graphileSettings } from '../baselines/graphile.js';
import { pgBossSettings } from '../baselines/pg-boss.js';
import { postgresServerCpu, serverCpuOnce } from '../server-cpu.js';
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
  effectRatios,
  graphileEffectSettings,
  NOOP_LABEL,
  noopSettings,
  OWN_TRANSACTION_LABEL,
  ownTransactionSettings,
  RAW_EFFECT_LABEL,
  rawEffectSettings,
  TRANSACTIONAL_LABEL,
  TUNED_GROUP_MS,
  TUNED_TRANSACTIONAL_LABEL,
  tunedTransactionalSettings,
  transactionalSettings,
  type EffectSystem,
} from './effects.js';
import {
  asynccmdPgEffectTarget,
  asynccmdPgLatencyTarget,
  asynccmdPgSubmitTarget,
  asynccmdPgTarget,
  freshCommandTable,
  graphileLatencyTarget,
  graphileSubmitTarget,
  graphileTarget,
  leanPgTarget,
  oneRoundTripSubmitTarget,
  pgBossTarget,
  PG_SCHEMAS,
  rawPgEffectTarget,
  rawPgSubmitTarget,
  rawPgTarget,
} from './pg-targets.js';
import { RAW_EFFECT_GROUP } from '../baselines/raw-effect-pg.js';
import type { Recorder, Suite } from './recorder.js';
import type { Scenario, Sizes } from './sizes.js';

const DRAIN = 'PostgreSQL: drain';
const EFFECTS = 'PostgreSQL: drain, one effect row per command';
const MEMORY = 'PostgreSQL: one consumer, memory';
const LATENCY = 'PostgreSQL: commit → start latency';
const SUBMIT = 'PostgreSQL: single submits';

/**
 * The PostgreSQL scenarios. Within a repeat the systems run back to back (asynccmd, then its
 * baselines), so that ratios pair runs made under the same machine load.
 */
export function postgresSuite(sizes: Sizes, rec: Recorder, scenarios: ReadonlySet<Scenario>): Suite {
  const pool = pgPool(4);
  const drains = scenarios.has('drain') ? pgDrainRows(sizes, rec, pool) : [];
  const effects = scenarios.has('effects') ? pgEffectRows(sizes, rec, pool, drains) : [];
  const lat = scenarios.has('latency') ? latencyRows(rec, `1 submit / ${sizes.latencyIntervalMs} ms`) : null;
  const burst = `${sizes.submits} × (BEGIN; insert; COMMIT), ${sizes.submitClients} clients`;
  const sub = scenarios.has('submits')
    ? {
        asynccmd: rec.row(
          SUBMIT,
          burst,
          'asynccmd client.submit',
          'submits/s',
          'client.transaction((tx, submit) => submit(…)), runtime defaults',
        ),
        graphile: rec.row(
          SUBMIT,
          burst,
          `${peer('graphile-worker')} add_job`,
          'submits/s',
          "SELECT graphile_worker.add_job(…) inside the caller's BEGIN … COMMIT (its transactional addJob)",
        ),
        raw: rec.row(
          SUBMIT,
          burst,
          'raw INSERT',
          'submits/s',
          'the same row by a plain INSERT in BEGIN … COMMIT',
        ),
        oneTrip: rec.row(
          SUBMIT,
          burst,
          'one-round-trip INSERT',
          'submits/s',
          'BEGIN; INSERT; COMMIT sent as one simple query (payload inlined)',
        ),
      }
    : null;
  const { latencySamples: n, latencyIntervalMs: every, latencyWarmup: warm, runTimeoutMs: limit } = sizes;
  const { submits, submitClients: clients, submitWarmup: warmSubmits, submitRounds } = sizes;

  const memory = scenarios.has('memory')
    ? rec.row(
        MEMORY,
        `${sizes.memoryTotal.toLocaleString('en-US')} pending, C=${sizes.concurrency}, 1 process, never analyzed`,
        'asynccmd defaults',
        'jobs/s',
        `${ASYNCCMD_DEFAULTS}; pre-inserted by one INSERT … SELECT generate_series; peak RSS of the consumer process`,
      )
    : null;
  let memoryRepeat = 0;
  const serverCpu = serverCpuOnce(
    () => postgresServerCpu(pool),
    (why) => {
      for (const section of [
        drains.length > 0 ? DRAIN : null,
        effects.length > 0 ? EFFECTS : null,
        memory ? MEMORY : null,
        lat ? LATENCY : null,
      ])
        if (section) rec.note(section, `DB CPU µs/cmd not measured: ${why}`);
    },
  );

  let submitRepeat = 0;
  return {
    name: 'PostgreSQL',
    repeat: async () => {
      const server = await serverCpu();
      await runDrainRows(rec, sizes, interleaveByShape<DrainRow<string>>(drains, effects), server);
      // Minutes long: once per bench run, whatever the repeats.
      if (memory && memoryRepeat++ === 0) {
        await rec.throughput(memory, () =>
          runDrain(
            asynccmdPgTarget(pool, 0),
            sizes.memoryTotal,
            1,
            sizes.concurrency,
            sizes.memoryCapMs,
            server,
          ),
        );
      }
      if (lat) {
        const [ours, theirs] = await latencyInRounds(
          [asynccmdPgLatencyTarget(pool), graphileLatencyTarget(pool)],
          sizes,
          server,
        );
        await recordLatency(rec, lat.asynccmd, ours!);
        await recordLatency(rec, lat.graphile, theirs!);
        await recordLatency(
          rec,
          lat.immediate,
          runImmediateLatency(
            () => freshCommandTable(pool, PG_SCHEMAS.asynccmd),
            { kind: 'asynccmd-pg', schema: PG_SCHEMAS.asynccmd },
            n,
            every,
            warm,
            limit,
          ),
        );
      }
      if (sub) {
        const runs: [Measurement, SubmitTarget][] = [
          [sub.asynccmd, asynccmdPgSubmitTarget(pool)],
          [sub.graphile, graphileSubmitTarget(pool)],
          [sub.raw, rawPgSubmitTarget(pool)],
          [sub.oneTrip, oneRoundTripSubmitTarget(pool)],
        ];
        // A run is about a second long, so a repeat makes several rounds of all systems (each a
        // paired ratio). Each round starts with another system: none always runs first (or right
        // after the previous scenario's writes).
        for (let round = 0; round < submitRounds; round++) {
          for (let i = 0; i < runs.length; i++) {
            const [row, target] = runs[(i + submitRepeat) % runs.length]!;
            await rec.throughput(row, () => runSubmits(target, submits, clients, warmSubmits, limit));
          }
          submitRepeat++;
        }
      }
    },
    finish: async () => {
      if (drains.length > 0) drainRatios(rec, drains, sizes);
      // The 1,000,000-pending drain against the empty table's rate at the same shape (issue 36).
      const emptyAtMemoryShape = drains.find(
        (d) =>
          d.system === 'asynccmd' &&
          !d.history &&
          d.shape.concurrency === sizes.concurrency &&
          d.shape.processes === 1,
      );
      if (memory && emptyAtMemoryShape)
        rec.ratio(
          DRAIN,
          `asynccmd ${sizes.memoryTotal.toLocaleString('en-US')} pending / empty table, C=${sizes.concurrency}, 1 process`,
          memory,
          emptyAtMemoryShape.row,
          {
            atLeast: 0.9,
          },
        );
      effectRatios(
        rec,
        EFFECTS,
        effects,
        (shape) => findRow(drains, 'asynccmd', shape),
        (shape) => shape.concurrency === sizes.concurrency,
        (shape) => findRow(drains, 'graphile', shape),
      );
      if (memory) rec.peakRssBound(MEMORY, 'asynccmd consumer peak RSS', memory, { atMost: 150 });
      if (lat) {
        const p99 = 'p99 / graphile-worker p99 (lower is better)';
        rec.ratio(LATENCY, `asynccmd ${p99}`, lat.asynccmd.fromCommit, lat.graphile.fromCommit, {
          atMost: 1,
        });
        rec.ratio(
          LATENCY,
          `asynccmd BEGIN → start ${p99}`,
          lat.asynccmd.fromBegin,
          lat.graphile.fromBegin,
          {},
        );
        rec.bound(LATENCY, 'asynccmd IMMEDIATE p99', lat.immediate.fromCommit, { atMost: 2 });
      }
      if (sub) {
        rec.ratio(SUBMIT, 'asynccmd / graphile-worker add_job', sub.asynccmd, sub.graphile, { atLeast: 5 });
        rec.ratio(SUBMIT, 'asynccmd / raw INSERT', sub.asynccmd, sub.raw, { atLeast: 0.8 });
        // No targets: how far asynccmd is from a client that adds nothing to the database's work,
        // and how far such a client gets against add_job on this machine (the reachable ratio).
        rec.ratio(SUBMIT, 'asynccmd / one-round-trip INSERT', sub.asynccmd, sub.oneTrip, {});
        rec.ratio(SUBMIT, 'one-round-trip INSERT / graphile-worker add_job', sub.oneTrip, sub.graphile, {});
      }
      for (const schema of Object.values(PG_SCHEMAS)) await dropSchema(pool, schema).catch(() => undefined);
      await pool.end();
    },
  };
}

type PgDrainSystem =
  | 'asynccmd'
  | 'queued'
  | 'graphile'
  | 'graphile-default'
  | 'pg-boss'
  | 'raw-batch'
  | 'raw-c'
  | 'lean'
  | 'scheduled'
  | FeatureUsageKey;

const ASYNCCMD_DEFAULTS =
  'executor mode ASYNC_POOL; runtime defaults: sharedPool { concurrency: C }, everything else default';

function pgDrainRows(sizes: Sizes, rec: Recorder, pool: Pool): DrainRow<PgDrainSystem>[] {
  const gw = peer('graphile-worker');
  const batch = sizes.rawBatch;
  return drainRows<PgDrainSystem>(rec, DRAIN, sizes, sizes.pgShapes, 'tables never analyzed', (shape) => {
    const queueSize = Math.max(0, batch - shape.concurrency);
    const entries: PlanEntry<PgDrainSystem>[] = [
      ['asynccmd', 'asynccmd defaults', ASYNCCMD_DEFAULTS, asynccmdPgTarget(pool, 0), false],
      ['graphile', `${gw}, local queue`, graphileSettings(true), graphileTarget(pool, true), false],
      ['graphile-default', `${gw}, defaults`, graphileSettings(false), graphileTarget(pool, false), false],
      [
        'pg-boss',
        `${peer('pg-boss')}, batchSize ${batch}`,
        pgBossSettings(batch),
        pgBossTarget(pool, batch),
        false,
      ],
      [
        'raw-batch',
        `raw SQL loop, batch ${batch}`,
        `one connection: WITH due AS (SELECT … FOR UPDATE SKIP LOCKED LIMIT ${batch}) UPDATE … RETURNING, then one token-fenced UPDATE completes the batch; synchronous_commit off; sorts, bitmap and seq scans off, as in the adapter's claim function`,
        rawPgTarget(pool, 0, batch),
        false,
      ],
      [
        'raw-c',
        'raw SQL loop, batch C',
        'as the batch-500 loop, claiming C rows at a time',
        rawPgTarget(pool, 0, shape.concurrency),
        false,
      ],
      [
        'lean',
        `lean bare loop, batch ${batch}`,
        `the physical reference: a lean table (11 columns, primary key + one partial claim index), claim ${batch} FOR UPDATE SKIP LOCKED + UPDATE … RETURNING, complete = one UPDATE … WHERE id = ANY($1) AND claim_token = $2 while the next claim runs on a second connection; synchronous_commit off; the row stays`,
        leanPgTarget(pool, batch),
        false,
      ],
      [
        'queued',
        `asynccmd, queueSize ${queueSize}`,
        `sharedPool { concurrency: C, queueSize: ${batch} − C }: not a default; how much of the gap is the claim size`,
        asynccmdPgTarget(pool, 0, queueSize),
        false,
      ],
    ];
    // One at a time, whatever C: beside the first one-process shape (C=1 in the full run).
    if (shape === sizes.pgShapes.find((s) => s.processes === 1)) {
      entries.push([
        'scheduled',
        SCHEDULED_LABEL,
        SCHEDULED_SETTINGS,
        asynccmdPgTarget(pool, 0, undefined, undefined, 'SCHEDULED'),
        false,
      ]);
    }
    if (shape.concurrency === sizes.concurrency && shape.processes === sizes.processes) {
      for (const [usage, key] of FEATURE_USAGES)
        entries.push([
          key,
          `asynccmd, ${usage} in use`,
          usageSettings(usage),
          asynccmdPgTarget(pool, 0, undefined, usage),
          false,
          usageTotal(usage, sizes),
        ]);
    }
    if (shape.concurrency === sizes.concurrency && [1, sizes.processes].includes(shape.processes)) {
      entries.push([
        'asynccmd',
        'asynccmd defaults',
        ASYNCCMD_DEFAULTS,
        asynccmdPgTarget(pool, sizes.finishedRows),
        true,
      ]);
    }
    return entries;
  });
}

/**
 * The effect drains: asynccmd with a transactional executor, with a plain one inserting in its own
 * transaction, graphile-worker (local queue) inserting in its task, and the raw-SQL reference
 * (exactly once, nothing but the statements); asynccmd's no-op drain
 * too where the drain scenario does not run it in that shape.
 */
function pgEffectRows(
  sizes: Sizes,
  rec: Recorder,
  pool: Pool,
  drains: readonly DrainRow<PgDrainSystem>[],
): DrainRow<EffectSystem>[] {
  const store = 'store defaults (hot path synchronous_commit off; the transaction on its durable pool)';
  return drainRows<EffectSystem>(
    rec,
    EFFECTS,
    sizes,
    sizes.effectShapes,
    'tables never analyzed',
    (shape) => {
      const entries: PlanEntry<EffectSystem>[] = [];
      if (findRow(drains, 'asynccmd', shape) === undefined)
        entries.push(['noop', NOOP_LABEL, noopSettings(ASYNCCMD_DEFAULTS), asynccmdPgTarget(pool, 0), false]);
      entries.push(
        [
          'transactional',
          TRANSACTIONAL_LABEL,
          transactionalSettings(store),
          asynccmdPgEffectTarget(pool, 'transactional'),
          false,
        ],
        [
          'transactional-tuned',
          TUNED_TRANSACTIONAL_LABEL,
          tunedTransactionalSettings(),
          asynccmdPgEffectTarget(pool, 'transactional', TUNED_GROUP_MS),
          false,
        ],
        [
          'graphile',
          `${peer('graphile-worker')}, local queue, insert in its task`,
          graphileEffectSettings(graphileSettings(true)),
          graphileTarget(pool, true, true),
          false,
        ],
        [
          'own-transaction',
          OWN_TRANSACTION_LABEL,
          ownTransactionSettings(
            store,
            'on a pg pool of its own (C connections, synchronous_commit as the server: on)',
          ),
          asynccmdPgEffectTarget(pool, 'own-transaction'),
          false,
        ],
        [
          'raw',
          RAW_EFFECT_LABEL,
          rawEffectSettings(sizes.rawBatch, RAW_EFFECT_GROUP),
          rawPgEffectTarget(pool, sizes.rawBatch),
          false,
        ],
      );
      return entries;
    },
  );
}

/**
 * Issue 36's drain target against graphile-worker with its local queue: 1.1× at C=10 and C=50 in
 * one process, 1.0× at C=1 and with several processes.
 */
function graphileTarget36(shape: { processes: number; concurrency: number }): Target {
  return { atLeast: shape.processes === 1 && shape.concurrency >= 10 ? 1.1 : 1.0 };
}

function drainRatios(rec: Recorder, drains: readonly DrainRow<PgDrainSystem>[], sizes: Sizes): void {
  for (const shape of shapesOf(drains)) {
    const at = shapeLabel(shape);
    const row = (system: PgDrainSystem, history = false): Measurement | undefined =>
      findRow(drains, system, shape, history);
    const ours = row('asynccmd');
    const graphile = row('graphile');
    const raw = row('raw-batch');
    const ratio = (
      label: string,
      a: Measurement | undefined,
      b: Measurement | undefined,
      target: Target,
    ): void => {
      if (a && b) rec.ratio(DRAIN, `${label}, ${at}`, a, b, target);
    };
    ratio('asynccmd defaults / graphile-worker local queue', ours, graphile, graphileTarget36(shape));
    ratio('asynccmd defaults / raw batch-500 loop', ours, raw, { atLeast: 0.8 });
    ratio(
      `asynccmd with ${sizes.finishedRows.toLocaleString('en-US')} finished rows / empty table`,
      row('asynccmd', true),
      ours,
      {
        atLeast: 0.9,
      },
    );
    if (ours && graphile)
      rec.dbCpuRatio(
        DRAIN,
        `asynccmd DB CPU per command / graphile-worker's (lower is better), ${at}`,
        ours,
        graphile,
        {
          atMost: 1,
        },
      );
    ratio('asynccmd default mode (SCHEDULED) / graphile-worker local queue', row('scheduled'), graphile, {
      atLeast: 1.25,
    });
    ratio('asynccmd default mode (SCHEDULED) / raw batch-500 loop', row('scheduled'), raw, { atLeast: 0.8 });
    ratio('graphile-worker defaults / local queue', row('graphile-default'), graphile, {});
    ratio('pg-boss / graphile-worker local queue', row('pg-boss'), graphile, {});
    ratio('raw batch-500 loop / graphile-worker local queue', raw, graphile, {});
    ratio('lean bare loop / graphile-worker local queue', row('lean'), graphile, {});
    ratio('asynccmd defaults / lean bare loop', ours, row('lean'), {});
    ratio('raw batch-C loop / raw batch-500 loop', row('raw-c'), raw, {});
    ratio('asynccmd queueSize / raw batch-500 loop', row('queued'), raw, {});
    workflowRatios(rec, DRAIN, at, row, ours, 'asynccmd defaults', true);
  }
  flowRatios(rec, DRAIN, drains, 'asynccmd', 'asynccmd defaults');
}

interface LatencyRows {
  readonly fromCommit: Measurement;
  readonly fromBegin: Measurement;
}

/**
 * Each latency run fills two rows: COMMIT returned → start (the targets) and BEGIN → start (the
 * whole submit transaction included: what moving work into the COMMIT's round trip changes).
 */
function latencyRows(
  rec: Recorder,
  paced: string,
): Record<'asynccmd' | 'graphile' | 'immediate', LatencyRows> {
  const rows = (scenario: string, system: string, settings: string): LatencyRows => ({
    fromCommit: rec.row(LATENCY, scenario, system, 'ms', settings),
    fromBegin: rec.row(LATENCY, `${scenario}, BEGIN → start`, system, 'ms', settings),
  });
  return {
    asynccmd: rows(
      `${paced} from another process`,
      'asynccmd defaults',
      `${ASYNCCMD_DEFAULTS}; C=10, coalesced NOTIFY`,
    ),
    graphile: rows(
      `${paced} from another process`,
      `${peer('graphile-worker')}, local queue`,
      `${graphileSettings(true)}; C=10, LISTEN/NOTIFY`,
    ),
    immediate: rows(
      `${paced}, same process`,
      'asynccmd IMMEDIATE',
      'executor mode IMMEDIATE, submitter and executor in one process',
    ),
  };
}

async function recordLatency(rec: Recorder, rows: LatencyRows, run: Promise<StartLatency>): Promise<void> {
  run.catch(() => undefined); // recorded below, as both rows' failure
  await rec.latency(rows.fromCommit, async () => (await run).fromCommit);
  await rec.latency(rows.fromBegin, async () => (await run).fromBegin);
}
