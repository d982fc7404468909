import { table, type Comparison } from '../report.js';
import { meets, repeated } from '../stats.js';
import type { SoakRun } from './run.js';
import { submittedRate, windowRows } from './windows.js';

const VARIANT_TITLE = {
  autovacuum: 'autovacuum at its defaults',
  'no-autovacuum': 'autovacuum off',
  held: 'autovacuum at its defaults, a REPEATABLE READ snapshot held',
} as const;

const MARIADB_TITLE = {
  autovacuum: "the server's configuration",
  'no-autovacuum': 'not run',
  held: 'a REPEATABLE READ snapshot held',
} as const;

/** The report's section of a soak variant. */
export function soakSection(run: Pick<SoakRun, 'variant' | 'database'>): string {
  const title = run.database === 'PostgreSQL' ? VARIANT_TITLE : MARIADB_TITLE;
  return `${run.database}: soak, ${title[run.variant]}`;
}

/** Each run's verdicts as the report's comparisons (printed with the other targets). */
export function soakComparisons(runs: readonly SoakRun[]): Comparison[] {
  return runs.flatMap((run) =>
    run.verdicts.map((v) => {
      const ratio = repeated([v.value]);
      return {
        section: soakSection(run),
        label: `${run.label}: ${v.label}`,
        ratio,
        target: v.target,
        met: meets(ratio.median, v.target),
        unit: v.unit,
      };
    }),
  );
}

/** The windows of every run as tables, with the settings each ran with. */
export function renderSoak(runs: readonly SoakRun[], submitterSettings: string): string {
  const out: string[] = [];
  for (const run of runs) {
    const t = run.timing;
    const measured = Object.entries(run.measuredDrain)
      .map(([system, rate]) => `${system} ${Math.round(rate)}`)
      .join(', ');
    out.push(
      '',
      `== ${soakSection(run)}: ${run.label} ==`,
      `${run.server}; ${Math.round(t.durationS / 60)} min at ${run.submitRate} submits/s` +
        (measured
          ? ` (70 % of the slowest drain measured at the start: ${measured} jobs/s)`
          : ' (--soak-rate)') +
        (t.holdS > 0 ? `; snapshot held from s ${t.holdStartS} for ${t.holdS} s` : ''),
      `submitted ${Math.round(submittedRate(run.windows))}/s on average` +
        (submittedRate(run.windows) < 0.95 * run.submitRate
          ? `: the submitter fell behind the ${run.submitRate}/s asked (this machine's CPU), the verdicts are at the rate reached`
          : ''),
      `settings: ${run.settings}`,
      `dead tuples: ${run.deadMeaning}`,
      `submitter: ${submitterSettings}`,
      table(windowRows(run.windows)),
    );
    for (const e of run.errors) out.push(`ERROR: ${e.split('\n')[0] ?? e}`);
  }
  return out.join('\n');
}
