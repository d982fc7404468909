import { fileURLToPath } from 'node:url';
import { dialectOf, openFailure, redactUrl, serverTarget } from './db/database.js';
import { DEFAULT_PROFILES, scaleProfiles } from './downstream.js';
import { ProgressBar } from './load/progress.js';
import { writeCharts } from './experiment/charts.js';
import { runExperiment } from './experiment/run.js';
import { formatChecks, formatSweep, formatVariants, writeReport } from './experiment/report.js';

const HELP = `npm run experiment -- [--db postgres://…|mysql://…] [--schema PREFIX] [--orders N]
                          [--concurrency N] [--seed N] [--out DIR] [--latency-scale X] [--failure-scale X]
                          [--sweep R1,R2,… [--sweep-seconds S]]
  the sync/async boundary experiment (seed 2, §5): the same request mix against an all-synchronous
  order service and the split one (commands), side by side, then the five failure checks.
  --db      SQLite (default; files in a temp directory), or a PostgreSQL / MySQL / MariaDB server:
            each part gets a schema (PostgreSQL) or database (MySQL) of its own, PREFIX_<part>
  --schema  the prefix of those names (the parts are then kept); default a generated one, dropped at the end
  --sweep   then both variants again at each request rate (orders/s, open loop: arrivals do not wait
            for answers), S seconds each (default 8): response p95 and consistency window per rate
  Results: a table here, JSON in demo/results/ (or --out DIR).`;

function parseArgs(argv: readonly string[]):
  | {
      orders: number;
      concurrency: number;
      seed: number;
      out: string;
      latency: number;
      failures: number;
      db: string | null;
      schema: string | null;
      sweep: number[];
      sweepSeconds: number;
    }
  | string {
  const o = {
    db: null as string | null,
    schema: null as string | null,
    sweep: [] as number[],
    sweepSeconds: 8,
    orders: 300,
    concurrency: 16,
    seed: 42,
    out: fileURLToPath(new URL('../results', import.meta.url)),
    latency: 1,
    failures: 1,
  };
  for (let i = 0; i < argv.length; i++) {
    const [name, inline] = (argv[i] as string).split('=', 2) as [string, string | undefined];
    if (name === '--help' || name === '-h') return HELP;
    const value = inline ?? argv[++i];
    if (value === undefined) return `${name} needs a value\n\n${HELP}`;
    if (name === '--out') o.out = value;
    else if (name === '--sweep') {
      const rates = value.split(',').map((r) => Number(r.trim()));
      if (rates.length === 0 || rates.some((r) => !Number.isInteger(r) || r < 1 || r > 5_000))
        return `--sweep must be a comma-separated list of whole request rates from 1 to 5000 orders/s, not ${value}`;
      o.sweep = [...new Set(rates)].sort((a, b) => a - b);
    } else if (name === '--sweep-seconds') {
      const n = Number(value);
      if (!(n >= 1 && n <= 600)) return `--sweep-seconds must be a number from 1 to 600, not ${value}`;
      o.sweepSeconds = n;
    } else if (name === '--db') {
      if (dialectOf(value) === 'sqlite' && value !== 'sqlite')
        return `--db must be sqlite, postgres://… or mysql://…, not ${value}`;
      o.db = value === 'sqlite' ? null : value;
    } else if (name === '--schema') {
      if (!/^[a-z_][a-z0-9_]{0,29}$/.test(value))
        return `--schema must be 1 to 30 characters of a-z, 0-9 and _, starting with a letter or _`;
      o.schema = value;
    } else if (name === '--latency-scale' || name === '--failure-scale') {
      const x = Number(value);
      if (!(x >= 0 && x <= 100) || (name === '--latency-scale' && x === 0))
        return `${name} must be a number from 0 to 100`;
      o[name === '--latency-scale' ? 'latency' : 'failures'] = x;
    } else if (name === '--orders' || name === '--concurrency' || name === '--seed') {
      const n = Number(value);
      if (!Number.isInteger(n) || n < (name === '--seed' ? 0 : 1))
        return `${name} must be a positive integer, not ${value}`;
      o[name.slice(2) as 'orders' | 'concurrency' | 'seed'] = n;
    } else return `unknown option ${name}\n\n${HELP}`;
  }
  return o;
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  if (typeof args === 'string') {
    process.stderr.write(`${args}\n`);
    return args === HELP ? 0 : 2;
  }
  const out = process.stdout;
  if (args.schema !== null && args.db === null) {
    process.stderr.write('--schema needs a postgres:// or mysql:// --db\n');
    return 2;
  }
  out.write(
    `Sync/async boundary experiment: ${args.orders} orders, ${args.concurrency} concurrent clients, seed ${args.seed}, ` +
      'same downstream latency/failure profile for both variants\n',
  );
  const started = performance.now();
  let report: Awaited<ReturnType<typeof runExperiment>>;
  try {
    report = await runExperiment({
      ...args,
      profiles: scaleProfiles(DEFAULT_PROFILES, args.latency, args.failures),
      progress: new ProgressBar(process.stderr),
      onStage: (stage) => process.stderr.write(`── ${stage}\n`),
    });
  } catch (e) {
    const failure =
      args.db === null
        ? null
        : openFailure(
            e,
            serverTarget(args.db, 'experiment'),
            `the experiment's databases on ${redactUrl(args.db)}`,
          );
    if (failure === null) throw e;
    process.stderr.write(`${failure}\n`);
    return 1;
  }
  out.write(
    `\n${formatVariants(report.variants)}\n\nFailure checks\n${formatChecks(report.failureChecks)}\n`,
  );
  if (report.sweep) {
    out.write(
      `\nLoad sweep (open loop, ${report.sweep.secondsPerRate} s per rate)\n${formatSweep(report.sweep.points)}\n`,
    );
  }
  out.write(
    `\nDecision inputs: critical path ${report.decision.removableCriticalPathTime}; new consistency window ` +
      `${report.decision.newConsistencyWindow}; operational cost: ${report.decision.acceptedOperationalCost}\n`,
  );
  const file = writeReport(report, args.out);
  out.write(`\nJSON: ${file}   (${((performance.now() - started) / 1000).toFixed(1)} s)\n`);
  const charts = await writeCharts(report, file);
  if (charts.skipped) out.write(`Pictures: none (${charts.skipped})\n`);
  for (const svg of charts.files) out.write(`Picture: ${svg}\n`);
  return report.failureChecks.every((c) => c.passed) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`experiment failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
