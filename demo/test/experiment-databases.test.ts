import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { dropTarget, serverTarget, withTargetSession } from '../src/db/database.js';
import type { SqlSession } from '../src/db/sql.js';
import { DEMO_MAIN } from '../src/experiment/child-demo.js';
import type { ExperimentReport } from '../src/experiment/report.js';
import { allCommandRows, countOf } from '../src/experiment/observe.js';

const EXPERIMENT_MAIN = fileURLToPath(new URL('../dist/experiment.js', import.meta.url));
const out = mkdtempSync(join(tmpdir(), 'demo-experiment-databases-'));

const SERVERS = [
  {
    name: 'PostgreSQL',
    url: process.env.ASYNCCMD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    /** The schemas whose names start with `prefix`. */
    leftOver: (s: SqlSession, prefix: string) =>
      s.all<{ name: string }>('SELECT nspname AS name FROM pg_namespace WHERE nspname LIKE ?', [
        `${prefix}%`,
      ]),
  },
  {
    name: 'MariaDB',
    url: process.env.ASYNCCMD_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test',
    leftOver: (s: SqlSession, prefix: string) =>
      s.all<{ name: string }>(
        'SELECT schema_name AS name FROM information_schema.schemata WHERE schema_name LIKE ?',
        [`${prefix}%`],
      ),
  },
] as const;

/** Runs a built entry to completion; SIGKILLs it if it outlives the test. */
function run(entry: string, args: string[], timeoutMs: number) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [entry, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const kept: ReturnType<typeof serverTarget>[] = [];

afterAll(async () => {
  for (const t of kept) await dropTarget(t);
  rmSync(out, { recursive: true, force: true });
});

describe.each(SERVERS)('on $name', ({ name, url, leftOver }) => {
  it('npm run experiment -- --db URL: both variants and the five checks, each part in a schema of its own, dropped at the end', async () => {
    const dir = join(out, name);
    const { code, stdout, stderr } = await run(
      EXPERIMENT_MAIN,
      ['--db', url, '--orders', '16', '--concurrency', '4', '--out', dir],
      150_000,
    );
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    expect(stdout).toMatch(/all synchronous\s+│\s+split \(commands\)/);
    expect(stdout.match(/^PASS {2}\d\./gm)).toHaveLength(5);
    const [file] = readdirSync(dir).filter((f) => /^experiment-.*\.json$/.test(f));
    const report = JSON.parse(readFileSync(join(dir, file as string), 'utf8')) as ExperimentReport;
    expect(report.variants.map((v) => v.boundary)).toEqual(['synchronous', 'split']);
    expect(report.failureChecks.map((c) => c.passed)).toEqual([true, true, true, true, true]);
    // Pictures beside the JSON (no sweep asked for: no sweep picture).
    expect(stdout.match(/^Picture: .*-(distributions|timeline)\.svg$/gm)).toHaveLength(2);
    for (const v of report.variants) {
      const terminal = Object.values(v.terminalByState).reduce((a, b) => a + b, 0);
      expect(terminal + v.stillPending).toBe(v.acceptedOperations);
    }
    const prefix = /\((asynccmd_exp_[a-z0-9]+)_<part>\)/.exec(report.fixedConditions.database)?.[1];
    expect(prefix, report.fixedConditions.database).toBeDefined();
    // Looked for from a schema every server has: the parts themselves are gone.
    const home = serverTarget(url, url.startsWith('postgres') ? 'public' : 'information_schema');
    const rest = await withTargetSession(home, (s) => leftOver(s, prefix as string));
    expect(rest).toEqual([]);
  }, 160_000);

  it('npm start -- --db URL: a generated schema, dropped when it stops (SIGINT)', async () => {
    const child = spawn(process.execPath, [DEMO_MAIN, '--db', url, '--no-load', '--port', '0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    try {
      while (!/listening on /.test(stdout)) {
        if (child.exitCode !== null) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const schema = /(asynccmd_demo_[a-z0-9]+)/.exec(stdout)?.[1];
      expect(schema, stdout).toBeDefined();
      const home = serverTarget(url, url.startsWith('postgres') ? 'public' : 'information_schema');
      expect(await withTargetSession(home, (s) => leftOver(s, schema as string))).toHaveLength(1);
      child.kill('SIGINT');
      expect(await exited).toBe(0);
      expect(await withTargetSession(home, (s) => leftOver(s, schema as string))).toEqual([]);
    } finally {
      clearTimeout(timer);
      child.kill('SIGKILL');
    }
  }, 40_000);

  it('npm start -- --db URL --schema NAME: the built-in load on that schema, kept after the exit', async () => {
    const target = serverTarget(url, `demo_start_smoke_${process.pid}`);
    kept.push(target);
    const { code, stdout, stderr } = await run(
      DEMO_MAIN,
      ['--db', url, '--schema', target.schema, '--exit-after-load', '--orders', '12', '--port', '0'],
      60_000,
    );
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    expect(stdout).toContain(
      `orders and commands in one ${name === 'PostgreSQL' ? 'PostgreSQL schema' : 'MySQL/MariaDB database'}: ${target.schema}`,
    );
    expect(stdout).toMatch(/requests +12 POST \/orders/);
    const counts = await withTargetSession(target, async (s) => ({
      orders: Number((await s.all<{ n: number | string }>('SELECT COUNT(*) AS n FROM orders'))[0]?.n),
      commands: await countOf(s, `SELECT COUNT(*) AS n FROM ${await allCommandRows(s)}`),
    }));
    expect(counts.orders).toBeGreaterThan(0);
    expect(counts.commands).toBeGreaterThanOrEqual(counts.orders);
  }, 70_000);
});
