import { runDrain, type DrainTarget } from '../drain.js';
import type { Measurement } from '../report.js';
import type { Recorder } from './recorder.js';
import type { Sizes } from './sizes.js';

/** One drain run of a repeat: a system, with 1 or N processes, on an empty table or beside history. */
export interface DrainRow<S extends string> {
  readonly system: S;
  readonly processes: number;
  readonly history: boolean;
  readonly target: DrainTarget;
  readonly row: Measurement;
}

/** What runs with a given process count: [system, label, target, beside history?]. */
export type DrainPlan<S extends string> = (processes: number) => [S, string, DrainTarget, boolean][];

/** The drain runs of one repeat, 1 process first, then N, in the order the plan lists them. */
export function drainRows<S extends string>(
  rec: Recorder,
  section: string,
  sizes: Sizes,
  plan: DrainPlan<S>,
): DrainRow<S>[] {
  const k = (n: number): string => (n >= 1000 ? `${n / 1000}k` : String(n));
  return [1, sizes.processes].flatMap((processes) => {
    const where = `${k(sizes.drainTotal)} × c${sizes.concurrency}, ${processes} proc`;
    const history = `${where}, +${k(sizes.finishedRows)} SUCCESS rows`;
    return plan(processes).map(([system, label, target, hist]) => ({
      system,
      processes,
      history: hist,
      target,
      row: rec.row(section, hist ? history : where, label, 'jobs/s'),
    }));
  });
}

export async function runDrainRows<S extends string>(
  rec: Recorder,
  sizes: Sizes,
  rows: readonly DrainRow<S>[],
): Promise<void> {
  for (const d of rows) {
    await rec.throughput(d.row, () =>
      runDrain(d.target, sizes.drainTotal, d.processes, sizes.concurrency, sizes.drainCapMs),
    );
  }
}

/** The measurement of one run in the plan. */
export function rowOf<S extends string>(
  rows: readonly DrainRow<S>[],
  system: S,
  processes: number,
  history = false,
): Measurement {
  const found = rows.find((d) => d.system === system && d.processes === processes && d.history === history);
  if (!found) throw new Error(`no drain row for ${system}, ${processes} processes, history ${history}`);
  return found.row;
}

export const processesLabel = (p: number): string => `${p} process${p > 1 ? 'es' : ''}`;
