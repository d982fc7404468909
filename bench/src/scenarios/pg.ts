import { runDrain, type DrainTarget } from '../drain.js';
import { runImmediateLatency, runLatency } from '../latency.js';
import { dropSchema, pgPool } from '../pg.js';
import { runSubmits } from '../submits.js';
import {
  asynccmdPgLatencyTarget,
  asynccmdPgSubmitTarget,
  asynccmdPgTarget,
  freshCommandTable,
  graphileLatencyTarget,
  graphileSubmitTarget,
  graphileTarget,
  PG_SCHEMAS,
  rawPgSubmitTarget,
  rawPgTarget,
} from './pg-targets.js';
import type { Recorder, Suite } from './recorder.js';
import type { Sizes } from './sizes.js';

const DRAIN = 'PostgreSQL: drain';
const LATENCY = 'PostgreSQL: commit → start latency';
const SUBMIT = 'PostgreSQL: single submits';

/**
 * The PostgreSQL scenarios. Within a repeat the systems run back to back (asynccmd, then its
 * baselines), so that ratios pair runs made under the same machine load.
 */
export function postgresSuite(sizes: Sizes, rec: Recorder): Suite {
  const pool = pgPool(4);
  const drains = drainRows(rec, sizes, pool);
  const lat = {
    asynccmd: rec.row(
      LATENCY,
      `1 submit / ${sizes.latencyIntervalMs} ms from another process`,
      'asynccmd',
      'ms',
    ),
    graphile: rec.row(
      LATENCY,
      `1 submit / ${sizes.latencyIntervalMs} ms from another process`,
      'graphile-worker',
      'ms',
    ),
    immediate: rec.row(
      LATENCY,
      `1 submit / ${sizes.latencyIntervalMs} ms, same process`,
      'asynccmd IMMEDIATE',
      'ms',
    ),
  };
  const submitScenario = `${sizes.submits} × (BEGIN; insert; COMMIT), ${sizes.submitClients} clients`;
  const sub = {
    asynccmd: rec.row(SUBMIT, submitScenario, 'asynccmd client.submit', 'submits/s'),
    graphile: rec.row(SUBMIT, submitScenario, 'graphile-worker add_job', 'submits/s'),
    raw: rec.row(SUBMIT, submitScenario, 'raw INSERT', 'submits/s'),
  };

  return {
    name: 'PostgreSQL',
    repeat: async () => {
      for (const d of drains) {
        await rec.throughput(d.row, () =>
          runDrain(d.target, sizes.drainTotal, d.processes, sizes.concurrency, sizes.runTimeoutMs),
        );
      }
      const { latencySamples: n, latencyIntervalMs: every, latencyWarmup: warm, runTimeoutMs: limit } = sizes;
      await rec.latency(lat.asynccmd, () => runLatency(asynccmdPgLatencyTarget(pool), n, every, warm, limit));
      await rec.latency(lat.graphile, () => runLatency(graphileLatencyTarget(pool), n, every, warm, limit));
      await rec.latency(lat.immediate, () =>
        runImmediateLatency(
          () => freshCommandTable(pool, PG_SCHEMAS.asynccmd),
          { kind: 'asynccmd-pg', schema: PG_SCHEMAS.asynccmd },
          n,
          every,
          warm,
          limit,
        ),
      );
      const { submits, submitClients: clients } = sizes;
      await rec.throughput(sub.asynccmd, () =>
        runSubmits(asynccmdPgSubmitTarget(pool), submits, clients, limit),
      );
      await rec.throughput(sub.graphile, () =>
        runSubmits(graphileSubmitTarget(pool), submits, clients, limit),
      );
      await rec.throughput(sub.raw, () => runSubmits(rawPgSubmitTarget(pool), submits, clients, limit));
    },
    finish: async () => {
      for (const p of [1, sizes.processes]) {
        const of = (system: string, history = false): DrainRow =>
          drains.find((d) => d.processes === p && d.system === system && d.history === history) as DrainRow;
        const procs = `${p} process${p > 1 ? 'es' : ''}`;
        rec.ratio(DRAIN, `asynccmd / graphile-worker, ${procs}`, of('asynccmd').row, of('graphile').row, {
          atLeast: 1.25,
        });
        rec.ratio(DRAIN, `asynccmd / raw SQL loop, ${procs}`, of('asynccmd').row, of('raw').row, {
          atLeast: 0.8,
        });
        rec.ratio(
          DRAIN,
          `asynccmd with history / empty table, ${procs}`,
          of('asynccmd', true).row,
          of('asynccmd').row,
          {
            atLeast: 0.8,
          },
        );
      }
      rec.ratio(LATENCY, 'asynccmd p99 / graphile-worker p99 (lower is better)', lat.asynccmd, lat.graphile, {
        atMost: 1,
      });
      rec.bound(LATENCY, 'asynccmd IMMEDIATE p99', lat.immediate, { atMost: 2 });
      rec.ratio(SUBMIT, 'asynccmd / graphile-worker add_job', sub.asynccmd, sub.graphile, { atLeast: 5 });
      rec.ratio(SUBMIT, 'asynccmd / raw INSERT', sub.asynccmd, sub.raw, { atLeast: 0.8 });
      for (const schema of Object.values(PG_SCHEMAS)) await dropSchema(pool, schema).catch(() => undefined);
      await pool.end();
    },
  };
}

interface DrainRow {
  readonly system: 'asynccmd' | 'graphile' | 'raw';
  readonly processes: number;
  readonly history: boolean;
  readonly target: DrainTarget;
  readonly row: ReturnType<Recorder['row']>;
}

/** The drain runs of one repeat, in the order they run. */
function drainRows(rec: Recorder, sizes: Sizes, pool: ReturnType<typeof pgPool>): DrainRow[] {
  const rows: DrainRow[] = [];
  const k = (n: number): string => (n >= 1000 ? `${n / 1000}k` : String(n));
  for (const p of [1, sizes.processes]) {
    const where = `${k(sizes.drainTotal)} × c${sizes.concurrency}, ${p} proc`;
    const history = `${where}, +${k(sizes.finishedRows)} SUCCESS rows`;
    const add = (system: DrainRow['system'], label: string, target: DrainTarget, hist = false): void => {
      rows.push({
        system,
        processes: p,
        history: hist,
        target,
        row: rec.row(DRAIN, hist ? history : where, label, 'jobs/s'),
      });
    };
    add('asynccmd', 'asynccmd', asynccmdPgTarget(pool, 0));
    add('graphile', 'graphile-worker', graphileTarget(pool));
    add('raw', 'raw SQL loop', rawPgTarget(pool, 0, sizes.concurrency));
    add('asynccmd', 'asynccmd', asynccmdPgTarget(pool, sizes.finishedRows), true);
  }
  return rows;
}
