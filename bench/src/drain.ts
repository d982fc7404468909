import { sleep, startAll, stopAll, type Child } from './fleet.js';
import type { ConsumerSpec } from './protocol.js';
import type { ServerCpu } from './server-cpu.js';
import { serverCpuWindow } from './server-cpu.js';
import { preciseNow } from './protocol.js';
import { rate } from './stats.js';

/** One system set up for a drain run: how to seed it, run it, and check it afterwards. */
export interface DrainTarget {
  readonly system: string;
  /**
   * Drops and recreates the system's tables, then seeds `total` PENDING commands seq 1..total: the
   * last `timed` of them are the timed window's, the ones before the warm-up (a target whose
   * window's commands are submitted otherwise, as workflows, seeds only the warm-up plainly).
   */
  prepare(total: number, timed: number): Promise<void>;
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
  /** Commands run before the window opened (the warm-up; it may overshoot or, capped, fall short). */
  readonly warmedUp: number;
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

/** Longest the untimed warm-up of a drain may take; a system slower than that is timed from there. */
const WARMUP_CAP_MS = 15_000;

/**
 * Seeds the queue, starts `processes` consumer children and waits until they are connected, then
 * sends "go". The first `warmupPerProcess × processes` commands warm the consumers up (JIT, plan
 * caches, a peer's own start-up) and are not timed: the window runs from the moment they have run
 * (or WARMUP_CAP_MS passed) until the executions reach all that was seeded and the database
 * confirms the drain, so it measures a consumer that has been running, as a deployed worker has.
 * A drain still running `capMs` into its window is stopped there: its figure is the rate until
 * then, and the check is that what ran ran exactly once while the rest went back to PENDING. The
 * cap keeps a slow system (or a loaded machine) from blowing the bench's time budget. Every command
 * seeded, warm-up included, is checked. With a `server` meter, the database server's CPU over the
 * window (to the consumers' exit) is reported too; consumer CPU is counted over the window alone.
 */
export async function runDrain(
  target: DrainTarget,
  total: number,
  processes: number,
  concurrency: number,
  capMs: number,
  server?: ServerCpu,
  warmupPerProcess = 0,
): Promise<DrainResult> {
  const seeded = total + warmupPerProcess * processes;
  await target.prepare(seeded, total);
  const children = await startAll(
    'consumer',
    Array.from({ length: processes }, () => target.consumer(concurrency)),
  );
  try {
    const started = performance.now();
    for (const c of children) c.send({ type: 'go' });
    while (sum(children) < seeded - total && performance.now() - started < WARMUP_CAP_MS) {
      failFast(children);
      await sleep(2);
    }
    // The window opens at the latest report: what each child had run by its latest report, and the
    // CPU it had used. (A child's count may be one report interval old: a bias of at most that.)
    const atMark = children.map((c) => c.progress);
    const warmedUp = atMark.reduce((n, p) => n + (p?.executed ?? 0), 0);
    const serverCpu = await serverCpuWindow(server);
    const t0 = Math.max(preciseNow() - (performance.now() - started), ...atMark.map((p) => p?.at ?? 0));
    while (sum(children) < seeded && preciseNow() - t0 < capMs) {
      failFast(children);
      await sleep(5);
    }
    let executed = sum(children);
    const complete = executed >= seeded;
    if (complete) {
      const deadline = performance.now() + SETTLE_MS;
      while (!(await target.drained())) {
        failFast(children);
        if (performance.now() > deadline) throw new Error('the database did not show the drain finished');
        await sleep(5);
      }
      executed = seeded;
    }
    const elapsedMs = preciseNow() - t0;
    const timed = executed - warmedUp;
    if (timed <= 0) throw new Error(`the warm-up ran all ${seeded} commands: nothing left to time`);
    await stopAll(children);
    const dbCpuUsPerCommand = await serverCpu(timed);
    failFast(children);
    const seqs = children.flatMap((c) => c.received('executions').flatMap((e) => e.seqs));
    const check = await target.verify(seeded, seqs, complete);
    const reports = children.flatMap((c) => c.received('executions'));
    const diagnostics = reports.flatMap((e) => e.diagnostics ?? []);
    // Each child's CPU from the mark on: its total from go less what its report at the mark said.
    const windowReports = children.flatMap((c, i) =>
      c.received('executions').map((r) => ({
        ...r,
        cpuMicros: (r.cpuMicros ?? Number.NaN) - (atMark[i]?.cpuMicros ?? 0),
      })),
    );
    return {
      rate: rate(timed, elapsedMs),
      elapsedMs,
      executed: timed,
      warmedUp,
      check,
      diagnostics,
      ...consumerCost(windowReports, timed),
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
