// @ts-check
/* The asynccmd dashboard: the recent outcomes and their bar charts, drawn in SVG attributes (see app.js). Values from the table go on the page as text only. */
import { $, duration, fill, svg, time } from './dom.js';

/** @param {any} outcomes */
export function renderOutcomes(outcomes) {
  if (!outcomes) {
    $('throughput-caption').textContent = 'The database could not be read.';
    $('latency-caption').textContent = '';
    $('distribution-caption').textContent = '';
    fill($('throughput-chart'));
    fill($('latency-chart'));
    fill($('distribution-chart'));
    return;
  }
  const span = duration(outcomes.windowMs);
  const per = duration(outcomes.bucketMs);
  const t = outcomes.total;
  $('throughput-caption').textContent =
    `${t.succeeded} succeeded, ${t.dead} dead in the last ${span} (bars of ${per}; green succeeded, red dead).`;
  $('latency-caption').textContent =
    t.p95Ms === null
      ? `Nothing finished in the last ${span}.`
      : `p95 ${duration(t.p95Ms)} over the last ${span}: from submit to success or dead letter.`;
  /** @type {any[]} */
  const buckets = outcomes.buckets;
  fill(
    $('throughput-chart'),
    barChart(
      buckets.map((b) => ({
        label: time(b.start),
        parts: [
          { value: b.succeeded, className: 'bar-ok', name: 'succeeded' },
          { value: b.dead, className: 'bar-dead', name: 'dead' },
        ],
      })),
      (v) => String(v),
    ),
  );
  fill(
    $('latency-chart'),
    barChart(
      buckets.map((b) => ({
        label: time(b.start),
        parts: [{ value: b.p95Ms ?? 0, className: 'bar-latency', name: 'p95' }],
      })),
      (v) => duration(v),
    ),
  );
  // What an API client waits for live traffic: every outcome of the window by its latency bound.
  /** @type {{ upToMs: number | null, count: number }[]} */
  const bars = t.distribution ?? [];
  $('distribution-caption').textContent =
    t.p50Ms === null
      ? `Nothing finished in the last ${span}.`
      : `p50 ${duration(t.p50Ms)} · p95 ${duration(t.p95Ms)} · p99 ${duration(t.p99Ms)} of ${t.succeeded + t.dead} outcomes in the last ${span}; each bar: how many took up to its bound.`;
  const bound = (/** @type {number | null} */ ms) => (ms === null ? 'longer' : `≤ ${duration(ms)}`);
  fill(
    $('distribution-chart'),
    barChart(
      bars.map((b) => ({
        label: bound(b.upToMs),
        parts: [{ value: b.count, className: 'bar-latency', name: 'outcomes' }],
      })),
      (v) => String(v),
      bars.length === 0 ? '' : bound(bars.at(-1)?.upToMs ?? null),
    ),
  );
}

/**
 * A small stacked bar chart in SVG, drawn with attributes only.
 * @param {{ label: string, parts: { value: number, className: string, name: string }[] }[]} bars
 * @param {(v: number) => string} format
 * @param {string} [lastLabel] what the right end of the axis says (default: "now", a time axis)
 */
function barChart(bars, format, lastLabel = 'now') {
  const width = 600;
  const height = 140;
  const top = 14;
  const bottom = 16;
  const max = Math.max(1, ...bars.map((b) => b.parts.reduce((n, p) => n + p.value, 0)));
  const chart = svg('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', preserveAspectRatio: 'none' });
  const slot = width / Math.max(1, bars.length);
  const plot = height - top - bottom;
  chart.append(svg('line', { x1: 0, x2: width, y1: height - bottom, y2: height - bottom, class: 'axis' }));
  bars.forEach((bar, i) => {
    let y = height - bottom;
    for (const part of bar.parts) {
      if (part.value <= 0) continue;
      const h = (part.value / max) * plot;
      y -= h;
      const rect = svg('rect', {
        x: i * slot + 1,
        y,
        width: Math.max(1, slot - 2),
        height: h,
        class: part.className,
      });
      const title = svg('title', {});
      title.textContent = `${bar.label}: ${format(part.value)} ${part.name}`;
      rect.append(title);
      chart.append(rect);
    }
  });
  const maxLabel = svg('text', { x: 2, y: 10 });
  maxLabel.textContent = `max ${format(max)}`;
  const first = svg('text', { x: 2, y: height - 3 });
  first.textContent = bars[0]?.label ?? '';
  const last = svg('text', { x: width - 2, y: height - 3, 'text-anchor': 'end' });
  last.textContent = lastLabel;
  chart.append(maxLabel, first, last);
  return chart;
}
