import { writeFile } from 'node:fs/promises';
import type { TopLevelSpec } from 'vega-lite';
import type { SoakRun } from './run.js';
import { windowP99 } from './windows.js';

/**
 * The soak's picture: one Vega-Lite specification (a row per measure, a column per variant, a line
 * per system over the run's seconds), rendered to SVG by Vega's headless renderer, as the demo's
 * experiment draws its charts.
 */

const MEASURES = [
  'drained/s',
  'backlog',
  'submit → start p99 (ms)',
  'table + index + TOAST (MB)',
  'dead tuples',
];

export interface SoakPoint {
  readonly second: number;
  readonly value: number;
  readonly measure: string;
  readonly system: string;
  readonly variant: string;
  /** The held snapshot's seconds in its run (0, 0 without one), shaded in the chart. */
  readonly holdFrom: number;
  readonly holdUntil: number;
}

/** Every window of every run as one point per measure (non-finite values left out). */
export function soakPoints(runs: readonly SoakRun[]): SoakPoint[] {
  return runs.flatMap((run) =>
    run.windows.flatMap((w) => {
      const values = [
        w.drained / w.seconds,
        w.backlog,
        windowP99(w),
        w.totalBytes / (1024 * 1024),
        w.deadTuples,
      ];
      return values
        .map((value, i) => ({
          second: w.endS,
          value,
          measure: MEASURES[i] as string,
          system: run.label,
          variant: `${run.database}, ${run.variant}`,
          holdFrom: run.timing.holdStartS,
          holdUntil: run.timing.holdStartS + run.timing.holdS,
        }))
        .filter((p) => Number.isFinite(p.value));
    }),
  );
}

export function soakChartSpec(runs: readonly SoakRun[]): TopLevelSpec {
  const held = runs.find((r) => r.variant === 'held')?.timing;
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: {
      text: 'Soak: per window, each system at the same submit rate',
      subtitle: held
        ? `held variant: a REPEATABLE READ snapshot from second ${held.holdStartS} for ${held.holdS} s (shaded)`
        : 'no held snapshot in this run',
    },
    data: { values: soakPoints(runs) },
    facet: {
      row: { field: 'measure', type: 'nominal', title: null, sort: MEASURES },
      column: { field: 'variant', type: 'nominal', title: null },
    },
    resolve: { scale: { y: 'independent' } },
    spec: {
      width: 320,
      height: 140,
      layer: [
        {
          // The held snapshot, shaded across the panel.
          transform: [
            { filter: 'datum.holdUntil > datum.holdFrom' },
            {
              aggregate: [
                { op: 'min', field: 'holdFrom', as: 'holdFrom' },
                { op: 'max', field: 'holdUntil', as: 'holdUntil' },
              ],
            },
          ],
          mark: { type: 'rect', color: '#bbbbbb', opacity: 0.35 },
          encoding: {
            x: { field: 'holdFrom', type: 'quantitative' },
            x2: { field: 'holdUntil' },
          },
        },
        {
          mark: { type: 'line', point: true, strokeWidth: 1.5 },
          encoding: {
            x: { field: 'second', type: 'quantitative', title: 's into the run' },
            y: { field: 'value', type: 'quantitative', title: null },
            color: { field: 'system', type: 'nominal', title: 'system' },
          },
        },
      ],
    },
  };
}

/**
 * Writes the chart beside the JSON (`<json without .json>-soak.svg`); returns the file, or why
 * there is none (vega and vega-lite are the demo's development dependencies, hoisted to the root).
 */
export async function writeSoakChart(
  runs: readonly SoakRun[],
  jsonFile: string,
): Promise<{ file: string } | { skipped: string }> {
  const libraries = await Promise.all([import('vega'), import('vega-lite')]).catch(() => null);
  if (libraries === null) {
    return { skipped: 'vega and vega-lite are not installed (npm install in the repository)' };
  }
  const [vega, vegaLite] = libraries;
  const view = new vega.View(vega.parse(vegaLite.compile(soakChartSpec(runs)).spec), { renderer: 'none' });
  try {
    const file = jsonFile.replace(/\.json$/, '') + '-soak.svg';
    await writeFile(file, await view.toSVG());
    return { file };
  } finally {
    view.finalize();
  }
}
