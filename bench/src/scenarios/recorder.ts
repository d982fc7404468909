import {
  bound,
  compare,
  compareDbCpu,
  measurement,
  peakRssBound,
  type Comparison,
  type Measurement,
} from '../report.js';
import type { Target } from '../stats.js';
import { percentile, summariseLatency } from '../stats.js';

/** One database's scenarios: run once per repeat, then `finish` adds the ratios and cleans up. */
export interface Suite {
  readonly name: string;
  repeat(): Promise<void>;
  finish(): Promise<void>;
}

/**
 * Collects the measurements and comparisons of a bench run. A failed run is recorded as NaN with
 * its error, so the repeats of all systems stay aligned for the paired ratios and the rest of the
 * bench still runs.
 */
export class Recorder {
  readonly measurements: Measurement[] = [];
  readonly comparisons: Comparison[] = [];
  readonly #samples = new Map<Measurement, number[]>();

  constructor(private readonly log: (line: string) => void) {}

  /** What did not run, per section, with the reason: printed under the section. */
  readonly notes: Record<string, string[]> = {};

  row(
    section: string,
    scenario: string,
    system: string,
    unit: Measurement['unit'],
    settings = '',
  ): Measurement {
    const m = measurement(section, scenario, system, unit, settings);
    this.measurements.push(m);
    return m;
  }

  /** Runs one repeat of a throughput figure. */
  async throughput(
    m: Measurement,
    run: () => Promise<{
      rate: number;
      check: string;
      diagnostics?: string[];
      cpuUsPerCommand?: number;
      peakRssMb?: number;
      dbCpuUsPerCommand?: number;
    }>,
  ): Promise<void> {
    const label = `${m.section} / ${m.scenario} / ${m.system}`;
    try {
      const r = await run();
      m.runs.push(r.rate);
      m.cpuUsPerCommand.push(r.cpuUsPerCommand ?? Number.NaN);
      m.peakRssMb.push(r.peakRssMb ?? Number.NaN);
      m.dbCpuUsPerCommand.push(r.dbCpuUsPerCommand ?? Number.NaN);
      if (!m.checks.includes(r.check)) m.checks.push(r.check);
      if (r.diagnostics && r.diagnostics.length > 0) m.diagnostics.push(r.diagnostics.join(' | '));
      const notes = r.diagnostics && r.diagnostics.length > 0 ? `; ${r.diagnostics.join(' | ')}` : '';
      this.log(`  ${label}: ${Math.round(r.rate)} ${m.unit} (${r.check}${notes})`);
    } catch (err) {
      m.runs.push(Number.NaN);
      m.cpuUsPerCommand.push(Number.NaN);
      m.peakRssMb.push(Number.NaN);
      m.dbCpuUsPerCommand.push(Number.NaN);
      m.errors.push(message(err));
      this.log(`  ${label}: FAILED ${message(err)}`);
    }
  }

  note(section: string, text: string): void {
    (this.notes[section] ??= []).push(text);
    this.log(`  ${section}: ${text}`);
  }

  /** Runs one repeat of a latency figure: its p99 is the run's value, its samples are pooled. */
  async latency(
    m: Measurement,
    run: () => Promise<{
      samples: number[];
      check: string;
      cpuUsPerCommand?: number;
      peakRssMb?: number;
      dbCpuUsPerCommand?: number;
      diagnostics?: string[];
    }>,
  ): Promise<void> {
    const label = `${m.section} / ${m.scenario} / ${m.system}`;
    try {
      const r = await run();
      if (r.diagnostics && r.diagnostics.length > 0) m.diagnostics.push(r.diagnostics.join(' | '));
      const pooled = [...(this.#samples.get(m) ?? []), ...r.samples];
      this.#samples.set(m, pooled);
      m.latency = summariseLatency(pooled);
      m.runs.push(percentile(r.samples, 99));
      m.cpuUsPerCommand.push(r.cpuUsPerCommand ?? Number.NaN);
      m.peakRssMb.push(r.peakRssMb ?? Number.NaN);
      m.dbCpuUsPerCommand.push(r.dbCpuUsPerCommand ?? Number.NaN);
      if (!m.checks.includes(r.check)) m.checks.push(r.check);
      const s = summariseLatency(r.samples);
      this.log(
        `  ${label}: p50 ${s.p50.toFixed(2)} p99 ${s.p99.toFixed(2)} max ${s.max.toFixed(2)} ms (${[r.check, ...(r.diagnostics ?? [])].join('; ')})`,
      );
    } catch (err) {
      m.runs.push(Number.NaN);
      m.cpuUsPerCommand.push(Number.NaN);
      m.peakRssMb.push(Number.NaN);
      m.dbCpuUsPerCommand.push(Number.NaN);
      m.errors.push(message(err));
      this.log(`  ${label}: FAILED ${message(err)}`);
    }
  }

  ratio(section: string, label: string, value: Measurement, baseline: Measurement, target: Target): void {
    this.comparisons.push(compare(section, label, value, baseline, target));
  }

  /** The database server's CPU per command, `value`'s over `baseline`'s, per repeat. */
  dbCpuRatio(
    section: string,
    label: string,
    value: Measurement,
    baseline: Measurement,
    target: Target,
  ): void {
    this.comparisons.push(compareDbCpu(section, label, value, baseline, target));
  }

  bound(section: string, label: string, value: Measurement, target: Target): void {
    this.comparisons.push(bound(section, label, value, target));
  }

  /** A bound on the peak RSS of a measurement's consumer, MiB. */
  peakRssBound(section: string, label: string, value: Measurement, target: Target): void {
    this.comparisons.push(peakRssBound(section, label, value, target));
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
