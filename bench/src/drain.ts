import { sleep, startAll, stopAll, type Child } from './fleet.js';
import type { ConsumerSpec } from './protocol.js';
import type { ServerCpu } from './server-cpu.js';
import { serverCpuWindow } from './server-cpu.js';
import { rate } from './stats.js';

/** One system set up for a drain run: how to seed it, run it, and check it afterwards. */
export interface DrainTarget {
  readonly system: string;
  /** Drops and recreates the system's tables, then seeds `total` PENDING commands seq 1..total. */
  prepare(total: number): Promise<void>;
  consumer(concurrency: number): ConsumerSpec;
  /** True once the database shows nothing left to run. */
  drained(): Promise<boolean>;
  /**
   * Checks the executions against the database; returns what was checked, throws what failed.
   * `complete` is false for a drain stopped at its time cap.
   */
  verify(total: number, executedSeqs: readonly number[], complete: boolean): Promise<string>;
}

export interface DrainResult {
  readonly rate: number;
  readonly elapsedMs: number;
  /** Commands run in the timed window: `total`, or fewer when the drain hit its time cap. */
  readonly executed: number;
  readonly check: string;
  /** Per-process notes of the consumers (e.g. rows claimed per round), for reading the figure. */
  readonly diagnostics: string[];
  /** CPU of all consumer processes from go to stop, per command run, µs. */
  readonly cpuUsPerCommand: number;
  /** The largest peak RSS of any one consumer process, MiB. */
  readonly peakRssMb: number;
  /** CPU of the database server from go to the consumers' exit, per command run, µs (NaN: not measured). */
  readonly dbCpuUsPerCommand: number;
}

/** How long the database may take to show a finished drain, and children to stop. */
const SETTLE_MS = 60_000;

/**
 * Seeds the queue, starts `processes` consumer children and waits until they are connected, then
 * times from "go" until the executions reach `total` and the database confirms the drain. A drain
 * still running after `capMs` is stopped there: its figure is the rate until then, and the check
 * is that what ran ran exactly once while the rest went back to PENDING. The cap keeps a slow
 * system (or a loaded machine) from blowing the bench's time budget. With a `server` meter, the
 * database server's CPU over the same window (go to the consumers' exit) is reported too.
 */
export async function runDrain(
  target: DrainTarget,
  total: number,
  processes: number,
  concurrency: number,
  capMs: number,
  server?: ServerCpu,
): Promise<DrainResult> {
  await target.prepare(total);
  const children = await startAll(
    'consumer',
    Array.from({ length: processes }, () => target.consumer(concurrency)),
  );
  try {
    const serverCpu = await serverCpuWindow(server);
    const t0 = performance.now();
    for (const c of children) c.send({ type: 'go' });
    while (sum(children) < total && performance.now() - t0 < capMs) {
      failFast(children);
      await sleep(5);
    }
    let executed = sum(children);
    const complete = executed >= total;
    if (complete) {
      const deadline = performance.now() + SETTLE_MS;
      while (!(await target.drained())) {
        failFast(children);
        if (performance.now() > deadline) throw new Error('the database did not show the drain finished');
        await sleep(5);
      }
      executed = total;
    }
    const elapsedMs = performance.now() - t0;
    await stopAll(children);
    const dbCpuUsPerCommand = await serverCpu(executed);
    failFast(children);
    const seqs = children.flatMap((c) => c.received('executions').flatMap((e) => e.seqs));
    const check = await target.verify(total, seqs, complete);
    const reports = children.flatMap((c) => c.received('executions'));
    const diagnostics = reports.flatMap((e) => e.diagnostics ?? []);
    return {
      rate: rate(executed, elapsedMs),
      elapsedMs,
      executed,
      check,
      diagnostics,
      ...consumerCost(reports, executed),
      dbCpuUsPerCommand,
    };
  } finally {
    for (const c of children) c.kill();
  }
}

function sum(children: readonly Child[]): number {
  return children.reduce((n, c) => n + c.executed, 0);
}

function failFast(children: readonly Child[]): void {
  const errors = children.flatMap((c) => c.errors);
  if (errors.length > 0) throw new Error(errors.join('; '));
}

/** CPU per command summed over the consumer processes, and the largest peak RSS among them. */
export function consumerCost(
  reports: readonly { cpuMicros?: number; peakRssKb?: number }[],
  executed: number,
): { cpuUsPerCommand: number; peakRssMb: number } {
  const cpu = reports.reduce((n, r) => n + (r.cpuMicros ?? Number.NaN), 0);
  const rss = Math.max(...reports.map((r) => r.peakRssKb ?? Number.NaN));
  return {
    cpuUsPerCommand: executed > 0 ? cpu / executed : Number.NaN,
    peakRssMb: rss / 1024,
  };
}
