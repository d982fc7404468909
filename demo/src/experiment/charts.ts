import { writeFileSync } from 'node:fs';
import type { TopLevelSpec } from 'vega-lite';
import type { TimelineEvent } from './checks.js';
import type { ExperimentReport } from './report.js';
import type { VariantResult } from './variant.js';

/** A picture of the report: its name (the file's suffix) and its Vega-Lite specification. */
export interface Chart {
  readonly name: string;
  readonly spec: TopLevelSpec;
}

const VARIANT_LABEL: Readonly<Record<VariantResult['boundary'], string>> = {
  synchronous: 'all synchronous',
  split: 'split (commands)',
};

/** One colour per variant in every picture. */
const VARIANT_COLOUR = {
  field: 'variant',
  type: 'nominal',
  title: 'variant',
  scale: { domain: Object.values(VARIANT_LABEL), range: ['#d62728', '#1f77b4'] },
} as const;

/** The empirical CDF of `values`, at most `points` steps (enough for a picture, small in the spec). */
export function cdf(values: readonly number[], points = 200): { ms: number; share: number }[] {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  if (n === 0) return [];
  const step = Math.max(1, Math.floor(n / points));
  const out: { ms: number; share: number }[] = [{ ms: sorted[0] as number, share: 0 }];
  for (let i = step - 1; i < n; i += step) out.push({ ms: sorted[i] as number, share: (i + 1) / n });
  if (out[out.length - 1]?.share !== 1) out.push({ ms: sorted[n - 1] as number, share: 1 });
  return out;
}

/**
 * Per variant, the CDFs of the response time and of accept → terminal, side by side on one time
 * axis: how much waiting moved out of the response, and how long the consistency window is.
 */
export function distributionChart(variants: readonly VariantResult[]): Chart {
  const rows = variants.flatMap((v) => [
    ...cdf(v.samples.responseMs).map((p) => ({
      ...p,
      variant: VARIANT_LABEL[v.boundary],
      measure: 'response time',
    })),
    ...cdf(v.samples.acceptToTerminalMs).map((p) => ({
      ...p,
      variant: VARIANT_LABEL[v.boundary],
      measure: 'accept → terminal',
    })),
  ]);
  return {
    name: 'distributions',
    spec: {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: {
        text: 'Response time and accept → terminal, per variant (cumulative share of requests / operations)',
        subtitle: 'the synchronous variant is terminal at its response: its accept → terminal is 0',
      },
      data: { values: rows },
      facet: {
        column: {
          field: 'measure',
          type: 'nominal',
          title: null,
          sort: ['response time', 'accept → terminal'],
        },
      },
      resolve: { scale: { x: 'shared', y: 'shared' } },
      spec: {
        width: 360,
        height: 240,
        mark: { type: 'line', interpolate: 'step-after', strokeWidth: 2 },
        encoding: {
          x: { field: 'ms', type: 'quantitative', title: 'ms' },
          y: { field: 'share', type: 'quantitative', title: 'share ≤ x', axis: { format: '%' } },
          color: VARIANT_COLOUR,
        },
      },
    },
  };
}

/** Response p95 and consistency window (accept → terminal p95) against the request rate of the sweep. */
export function sweepChart(report: ExperimentReport): Chart | null {
  if (!report.sweep) return null;
  const rows = report.sweep.points.flatMap((p) => [
    {
      rate: p.ratePerSec,
      variant: VARIANT_LABEL[p.boundary],
      measure: 'response p95',
      ms: p.responseMs.p95,
    },
    {
      rate: p.ratePerSec,
      variant: VARIANT_LABEL[p.boundary],
      measure: 'consistency window (accept → terminal p95)',
      ms: p.acceptToTerminalMs.p95,
    },
  ]);
  return {
    name: 'sweep',
    spec: {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: {
        text: 'Against the request rate (open loop)',
        subtitle: `${report.sweep.secondsPerRate} s of orders per rate and variant`,
      },
      data: { values: rows },
      facet: {
        column: {
          field: 'measure',
          type: 'nominal',
          title: null,
          sort: ['response p95', 'consistency window (accept → terminal p95)'],
        },
      },
      resolve: { scale: { y: 'independent' } },
      spec: {
        width: 320,
        height: 220,
        mark: { type: 'line', point: true, strokeWidth: 2 },
        encoding: {
          x: { field: 'rate', type: 'quantitative', title: 'orders per second' },
          y: { field: 'ms', type: 'quantitative', title: 'ms' },
          color: VARIANT_COLOUR,
        },
      },
    },
  };
}

/** How an event of a timeline reads: something broke, something came right, or neither. */
function eventKind(e: TimelineEvent): 'failure' | 'recovery' | 'step' {
  if (/failed|dead|down|503/.test(e.event)) return 'failure';
  if (/succeeded|recovered|completed|accepted|200/.test(e.event)) return 'recovery';
  return 'step';
}

/**
 * The timeline of failure check 2, one row per event in time order: accepted, the downstream
 * down, the attempts and retries, the dead letter, /health, the recovery, the operator's retry,
 * the end. The outage is the shaded band.
 */
export function timelineChart(report: ExperimentReport): Chart | null {
  const check = report.failureChecks.find((c) => c.id === 'downstream-fails-after-acceptance');
  const timeline = (check?.details as { timeline?: TimelineEvent[] } | undefined)?.timeline;
  if (!check || !timeline?.length) return null;
  const seen = new Map<string, number>();
  const rows = [...timeline]
    .sort((a, b) => a.atMs - b.atMs)
    .map((e, order) => {
      const key = `${e.lane}: ${e.event}`;
      const n = (seen.get(key) ?? 0) + 1;
      seen.set(key, n);
      const repeated = timeline.filter((x) => `${x.lane}: ${x.event}` === key).length > 1;
      return { ...e, order, kind: eventKind(e), label: repeated ? `${key} #${n}` : key };
    });
  const down = timeline.find((e) => e.lane === 'ERP (downstream)' && e.event === 'down');
  const up = timeline.find((e) => e.lane === 'ERP (downstream)' && e.event === 'recovered');
  const outage = down && up ? [{ from: down.atMs, to: up.atMs }] : [];
  const y = {
    field: 'label',
    type: 'nominal',
    sort: { field: 'order' },
    title: null,
    axis: { labelLimit: 320 },
  } as const;
  return {
    name: 'timeline',
    spec: {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: {
        text: 'Failure check 2: a downstream fails after acceptance',
        subtitle: `${check.passed ? 'passed' : 'FAILED'}; shaded: the ERP is down`,
      },
      width: 520,
      height: 18 * rows.length,
      layer: [
        {
          data: { values: outage },
          mark: { type: 'rect', color: '#d62728', opacity: 0.12 },
          encoding: { x: { field: 'from', type: 'quantitative' }, x2: { field: 'to' } },
        },
        {
          data: { values: rows },
          mark: { type: 'point', filled: true, size: 80 },
          encoding: {
            x: { field: 'atMs', type: 'quantitative', title: 'ms since the check began' },
            y,
            color: {
              field: 'kind',
              type: 'nominal',
              title: null,
              scale: { domain: ['failure', 'recovery', 'step'], range: ['#d62728', '#2ca02c', '#7f7f7f'] },
            },
            tooltip: [{ field: 'label' }, { field: 'atMs', title: 'ms' }],
          },
        },
        {
          data: { values: rows },
          mark: { type: 'text', align: 'left', dx: 7, fontSize: 10 },
          encoding: {
            x: { field: 'atMs', type: 'quantitative' },
            y,
            text: { field: 'atMs', format: 'd' },
          },
        },
      ],
    },
  };
}

export function reportCharts(report: ExperimentReport): Chart[] {
  return [distributionChart(report.variants), sweepChart(report), timelineChart(report)].filter(
    (c): c is Chart => c !== null,
  );
}

/** Renders a Vega-Lite specification to SVG with Vega's headless renderer (no browser). */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const [vega, vegaLite] = await Promise.all([import('vega'), import('vega-lite')]);
  const view = new vega.View(vega.parse(vegaLite.compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/**
 * Writes each picture of the report beside its JSON (`<json without .json>-<name>.svg`); returns
 * the files. Vega and Vega-Lite are development dependencies of the demo: without them, no pictures.
 */
export async function writeCharts(
  report: ExperimentReport,
  jsonFile: string,
): Promise<{ files: string[]; skipped: string | null }> {
  try {
    await Promise.all([import('vega'), import('vega-lite')]);
  } catch {
    return { files: [], skipped: 'vega and vega-lite are not installed (npm install in the repository)' };
  }
  const base = jsonFile.replace(/\.json$/, '');
  const files: string[] = [];
  for (const chart of reportCharts(report)) {
    const file = `${base}-${chart.name}.svg`;
    writeFileSync(file, await renderSvg(chart.spec));
    files.push(file);
  }
  return { files, skipped: null };
}
