import { fileURLToPath } from 'node:url';
import { DEFAULT_PROFILES, scaleProfiles } from './downstream.js';
import { ProgressBar } from './load/progress.js';
import { runExperiment } from './experiment/run.js';
import { formatChecks, formatVariants, writeReport } from './experiment/report.js';

const HELP = `npm run experiment -- [--orders N] [--concurrency N] [--seed N] [--out DIR]
                          [--latency-scale X] [--failure-scale X]
  the sync/async boundary experiment (seed 2, §5): the same request mix against an all-synchronous
  order service and the split one (commands), side by side, then the four failure checks.
  Results: a table here, JSON in demo/results/ (or --out DIR).`;

function parseArgs(
  argv: readonly string[],
):
  | { orders: number; concurrency: number; seed: number; out: string; latency: number; failures: number }
  | string {
  const o = {
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
    else if (name === '--latency-scale' || name === '--failure-scale') {
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
  out.write(
    `Sync/async boundary experiment: ${args.orders} orders, ${args.concurrency} concurrent clients, seed ${args.seed}, ` +
      'same downstream latency/failure profile for both variants\n',
  );
  const started = performance.now();
  const report = await runExperiment({
    ...args,
    profiles: scaleProfiles(DEFAULT_PROFILES, args.latency, args.failures),
    progress: new ProgressBar(process.stderr),
    onStage: (stage) => process.stderr.write(`── ${stage}\n`),
  });
  out.write(
    `\n${formatVariants(report.variants)}\n\nFailure checks\n${formatChecks(report.failureChecks)}\n`,
  );
  out.write(
    `\nDecision inputs: critical path ${report.decision.removableCriticalPathTime}; new consistency window ` +
      `${report.decision.newConsistencyWindow}; operational cost: ${report.decision.acceptedOperationalCost}\n`,
  );
  const file = writeReport(report, args.out);
  out.write(`\nJSON: ${file}   (${((performance.now() - started) / 1000).toFixed(1)} s)\n`);
  return report.failureChecks.every((c) => c.passed) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`experiment failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
