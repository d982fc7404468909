import { runDrain, type DrainTarget } from '../drain.js';
import type { Measurement } from '../report.js';
import type { ServerCpu } from '../server-cpu.js';
import type { Recorder } from './recorder.js';
import type { DrainShape, Sizes } from './sizes.js';

/** One drain run of a repeat: a system, in one shape, on an empty table or beside history. */
export interface DrainRow<S extends string> {
  readonly system: S;
  readonly shape: DrainShape;
  readonly history: boolean;
  readonly target: DrainTarget;
  readonly row: Measurement;
  /** Commands it times: the run's drainTotal unless its plan entry says otherwise. */
  readonly total: number;
}

/**
 * One entry of a plan: [system key, label, settings, target, beside history?, commands timed
 * (default: drainTotal)].
 */
export type PlanEntry<S extends string> = readonly [S, string, string, DrainTarget, boolean, number?];

/** What runs in a given shape. */
export type DrainPlan<S extends string> = (shape: DrainShape) => PlanEntry<S>[];

/** The row of asynccmd's default mode: what an executor that names no mode runs with. */
export const SCHEDULED_LABEL = 'asynccmd, default mode (SCHEDULED)';
export const SCHEDULED_SETTINGS =
  'an executor that names no mode: SCHEDULED, inline in the poll loop, one at a time (C does not apply); everything else default';

/** 2000 → "2k", 2500 → "2.5k"; a count that is not a round hundred as it is ("10,001"). */
const k = (n: number): string => (n >= 1000 && n % 100 === 0 ? `${n / 1000}k` : n.toLocaleString('en-US'));

export const shapeLabel = (s: DrainShape): string =>
  `C=${s.concurrency}, ${s.processes} process${s.processes > 1 ? 'es' : ''}`;

/**
 * The drain runs of one repeat, shape by shape in the order given, the systems of a shape back to
 * back (so the ratios of one shape pair runs made under the same load). `where` says what the
 * tables were like (e.g. "never analyzed").
 */
export function drainRows<S extends string>(
  rec: Recorder,
  section: string,
  sizes: Sizes,
  shapes: readonly DrainShape[],
  where: string,
  plan: DrainPlan<S>,
): DrainRow<S>[] {
  return shapes.flatMap((shape) => {
    const warmup = sizes.drainWarmupPerProcess > 0 ? ` after ${k(sizes.drainWarmupPerProcess)}/process` : '';
    const scenario = (total: number): string => `${k(total)}${warmup}, ${shapeLabel(shape)}, ${where}`;
    const history = `${scenario(sizes.drainTotal)}, +${k(sizes.finishedRows)} SUCCESS rows`;
    const wanted = sizes.rows;
    const planned = plan(shape).filter(([system]) => wanted === undefined || wanted.includes(system));
    return planned.map(([system, label, settings, target, hist, total = sizes.drainTotal]) => ({
      system,
      shape,
      history: hist,
      target,
      total,
      row: rec.row(section, hist ? history : scenario(total), label, 'jobs/s', settings),
    }));
  });
}

export async function runDrainRows<S extends string>(
  rec: Recorder,
  sizes: Sizes,
  rows: readonly DrainRow<S>[],
  server?: ServerCpu,
): Promise<void> {
  for (const d of rows) {
    await rec.throughput(d.row, () =>
      runDrain(
        d.target,
        d.total,
        d.shape.processes,
        d.shape.concurrency,
        sizes.drainCapMs,
        server,
        sizes.drainWarmupPerProcess,
      ),
    );
  }
}

/** The measurement of one run in the plan, or undefined when that run is not in it. */
export function findRow<S extends string>(
  rows: readonly DrainRow<S>[],
  system: S,
  shape: DrainShape,
  history = false,
): Measurement | undefined {
  return rows.find(
    (d) =>
      d.system === system &&
      d.shape.processes === shape.processes &&
      d.shape.concurrency === shape.concurrency &&
      d.history === history,
  )?.row;
}

/** The distinct shapes of a plan's rows, in order. */
export function shapesOf(rows: readonly { readonly shape: DrainShape }[]): DrainShape[] {
  const seen: DrainShape[] = [];
  for (const d of rows)
    if (!seen.some((s) => s.processes === d.shape.processes && s.concurrency === d.shape.concurrency))
      seen.push(d.shape);
  return seen;
}

/**
 * The runs of two plans in one order: each shape of `first` (in its order) followed by the runs of
 * `second` in the same shape, then the runs of `second` in shapes `first` does not have. So a
 * scenario whose ratios take a row of another (the effect drains against the no-op drain) runs
 * right after it, under the same load.
 */
export function interleaveByShape<T extends { readonly shape: DrainShape }>(
  first: readonly T[],
  second: readonly T[],
): T[] {
  const same = (a: DrainShape, b: DrainShape): boolean =>
    a.processes === b.processes && a.concurrency === b.concurrency;
  const out: T[] = [];
  const firstShapes = shapesOf(first);
  for (const shape of firstShapes) {
    out.push(...first.filter((r) => same(r.shape, shape)), ...second.filter((r) => same(r.shape, shape)));
  }
  out.push(...second.filter((r) => !firstShapes.some((s) => same(s, r.shape))));
  return out;
}
