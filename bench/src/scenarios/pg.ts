import { runImmediateLatency, runLatency, type StartLatency } from '../latency.js';
import type { Measurement } from '../report.js';
import { dropSchema, pgPool } from '../pg.js';
import { runSubmits, type SubmitTarget } from '../submits.js';
import type { Pool } from 'pg';
import { drainRows, processesLabel, rowOf, runDrainRows, type DrainRow } from './drain-rows.js';
import {
  asynccmdPgLatencyTarget,
  asynccmdPgSubmitTarget,
  asynccmdPgTarget,
  freshCommandTable,
  graphileLatencyTarget,
  graphileSubmitTarget,
  graphileTarget,
  oneRoundTripSubmitTarget,
  PG_SCHEMAS,
  rawPgSubmitTarget,
  rawPgTarget,
} from './pg-targets.js';
import type { Recorder, Suite } from './recorder.js';
import type { Scenario, Sizes } from './sizes.js';

const DRAIN = 'PostgreSQL: drain';
const LATENCY = 'PostgreSQL: commit → start latency';
const SUBMIT = 'PostgreSQL: single submits';

/**
 * The PostgreSQL scenarios. Within a repeat the systems run back to back (asynccmd, then its
 * baselines), so that ratios pair runs made under the same machine load.
 */
export function postgresSuite(sizes: Sizes, rec: Recorder, scenarios: ReadonlySet<Scenario>): Suite {
  const pool = pgPool(4);
  const drains = scenarios.has('drain') ? pgDrainRows(sizes, rec, pool) : [];
  const lat = scenarios.has('latency') ? latencyRows(rec, `1 submit / ${sizes.latencyIntervalMs} ms`) : null;
  const burst = `${sizes.submits} × (BEGIN; insert; COMMIT), ${sizes.submitClients} clients`;
  const sub = scenarios.has('submits')
    ? {
        asynccmd: rec.row(SUBMIT, burst, 'asynccmd client.submit', 'submits/s'),
        graphile: rec.row(SUBMIT, burst, 'graphile-worker add_job', 'submits/s'),
        raw: rec.row(SUBMIT, burst, 'raw INSERT', 'submits/s'),
        oneTrip: rec.row(SUBMIT, burst, 'one-round-trip INSERT', 'submits/s'),
      }
    : null;
  const { latencySamples: n, latencyIntervalMs: every, latencyWarmup: warm, runTimeoutMs: limit } = sizes;
  const { submits, submitClients: clients, submitWarmup: warmSubmits, submitRounds } = sizes;

  let submitRepeat = 0;
  return {
    name: 'PostgreSQL',
    repeat: async () => {
      await runDrainRows(rec, sizes, drains);
      if (lat) {
        await recordLatency(
          rec,
          lat.asynccmd,
          runLatency(asynccmdPgLatencyTarget(pool), n, every, warm, limit),
        );
        await recordLatency(
          rec,
          lat.graphile,
          runLatency(graphileLatencyTarget(pool), n, every, warm, limit),
        );
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
      if (drains.length > 0) drainRatios(sizes, rec, drains);
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

type PgDrainSystem = 'asynccmd' | 'graphile' | 'raw' | 'queued';

function pgDrainRows(sizes: Sizes, rec: Recorder, pool: Pool): DrainRow<PgDrainSystem>[] {
  return drainRows<PgDrainSystem>(rec, DRAIN, sizes, () => [
    ['asynccmd', 'asynccmd', asynccmdPgTarget(pool, 0), false],
    ['graphile', 'graphile-worker', graphileTarget(pool), false],
    ['raw', 'raw SQL loop', rawPgTarget(pool, 0, sizes.concurrency), false],
    // Not a default: shows how much of the gap to the raw loop is the claim size (see README).
    ['queued', 'asynccmd, pool queueSize 10', asynccmdPgTarget(pool, 0, sizes.concurrency), false],
    ['asynccmd', 'asynccmd', asynccmdPgTarget(pool, sizes.finishedRows), true],
  ]);
}

function drainRatios(sizes: Sizes, rec: Recorder, drains: readonly DrainRow<PgDrainSystem>[]): void {
  for (const p of [1, sizes.processes]) {
    const ours = rowOf(drains, 'asynccmd', p);
    const procs = processesLabel(p);
    rec.ratio(DRAIN, `asynccmd / graphile-worker, ${procs}`, ours, rowOf(drains, 'graphile', p), {
      atLeast: 1.25,
    });
    rec.ratio(DRAIN, `asynccmd / raw SQL loop, ${procs}`, ours, rowOf(drains, 'raw', p), {
      atLeast: 0.8,
    });
    rec.ratio(
      DRAIN,
      `asynccmd with history / empty table, ${procs}`,
      rowOf(drains, 'asynccmd', p, true),
      ours,
      {
        atLeast: 0.8,
      },
    );
    rec.ratio(
      DRAIN,
      `asynccmd queueSize 10 / raw SQL loop, ${procs}`,
      rowOf(drains, 'queued', p),
      rowOf(drains, 'raw', p),
      {},
    );
  }
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
  const rows = (scenario: string, system: string): LatencyRows => ({
    fromCommit: rec.row(LATENCY, scenario, system, 'ms'),
    fromBegin: rec.row(LATENCY, `${scenario}, BEGIN → start`, system, 'ms'),
  });
  return {
    asynccmd: rows(`${paced} from another process`, 'asynccmd'),
    graphile: rows(`${paced} from another process`, 'graphile-worker'),
    immediate: rows(`${paced}, same process`, 'asynccmd IMMEDIATE'),
  };
}

async function recordLatency(rec: Recorder, rows: LatencyRows, run: Promise<StartLatency>): Promise<void> {
  run.catch(() => undefined); // recorded below, as both rows' failure
  await rec.latency(rows.fromCommit, async () => (await run).fromCommit);
  await rec.latency(rows.fromBegin, async () => (await run).fromBegin);
}
