import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { ExperimentReport } from '../src/experiment/report.js';

const EXPERIMENT_MAIN = fileURLToPath(new URL('../dist/experiment.js', import.meta.url));
const out = mkdtempSync(join(tmpdir(), 'demo-experiment-entry-'));

afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('npm run experiment', () => {
  it('prints both variants side by side, the five checks and the load sweep, and writes the JSON report', async () => {
    const child = spawn(
      process.execPath,
      [
        EXPERIMENT_MAIN,
        '--orders',
        '24',
        '--concurrency',
        '4',
        '--sweep',
        '20,10',
        '--sweep-seconds',
        '1',
        '--out',
        out,
      ],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 110_000);
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    clearTimeout(timer);
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    expect(stdout).toMatch(/all synchronous\s+│\s+split \(commands\)/);
    for (const row of [
      'response p50 / p95 / p99',
      'completed throughput',
      'accept→terminal p95 / p99',
      'pending age p95 / p99',
    ]) {
      expect(stdout).toContain(row);
    }
    expect(stdout.match(/^PASS {2}\d\./gm)).toHaveLength(5);
    const files = readdirSync(out).filter((f) => /^experiment-.*\.json$/.test(f));
    expect(files).toHaveLength(1);
    const report = JSON.parse(readFileSync(join(out, files[0] as string), 'utf8')) as ExperimentReport;
    expect(report.variants.map((v) => v.boundary)).toEqual(['synchronous', 'split']);
    expect(report.failureChecks.map((c) => c.passed)).toEqual([true, true, true, true, true]);
    expect(report.fixedConditions.orders).toBe(24);
    // The sweep: both variants at each rate, in rate order, each sending rate × seconds orders.
    expect(stdout).toMatch(/Load sweep \(open loop, 1 s per rate\)/);
    expect(report.sweep?.points.map((p) => [p.ratePerSec, p.boundary, p.requests])).toEqual([
      [10, 'synchronous', 10],
      [10, 'split', 10],
      [20, 'synchronous', 20],
      [20, 'split', 20],
    ]);
    for (const p of report.sweep?.points ?? []) expect(p.responseMs.count).toBe(p.requests);
    // The pictures, beside the JSON, each named in the printed report.
    const base = join(out, (files[0] as string).replace(/\.json$/, ''));
    for (const name of ['distributions', 'sweep', 'timeline']) {
      const svg = `${base}-${name}.svg`;
      expect(stdout).toContain(`Picture: ${svg}`);
      expect(readFileSync(svg, 'utf8')).toMatch(/^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    }
    expect(readFileSync(`${base}-timeline.svg`, 'utf8')).toContain('ERP sync command: dead letter');
  }, 120_000);
});
