import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { mysqlPool, mysqlVersion } from './mysql.js';
import { pgPool, pgVersion } from './pg.js';
import { renderReport, writeJson, type MachineInfo } from './report.js';
import { benchMysql } from './scenarios/mysql.js';
import { benchPostgres } from './scenarios/pg.js';
import { Recorder } from './scenarios/recorder.js';
import { FULL, QUICK, type Sizes } from './scenarios/sizes.js';

const USAGE = `npm run bench [-- options]
  --only pg|mysql   run one database's scenarios
  --quick           small sizes, one repeat (for development)
  --repeats N       repeat every scenario N times (default 2)
  --out FILE        JSON result path (default bench/results/<timestamp>.json)`;

/**
 * `npm run bench`: runs the scenarios, prints the table of figures and ratios against the
 * baselines measured in the same run, and writes everything as JSON.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      only: { type: 'string' },
      quick: { type: 'boolean', default: false },
      repeats: { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return console.log(USAGE);
  if (values.only !== undefined && values.only !== 'pg' && values.only !== 'mysql') {
    throw new Error(`--only takes pg or mysql\n${USAGE}`);
  }
  const base = values.quick ? QUICK : FULL;
  const repeats = values.repeats === undefined ? base.repeats : Number(values.repeats);
  if (!Number.isInteger(repeats) || repeats < 1)
    throw new Error(`--repeats takes a positive integer\n${USAGE}`);
  const sizes: Sizes = { ...base, repeats };
  const startedAt = new Date();
  const stamp = startedAt.toISOString().replace(/[:.]/g, '-');
  const out = values.out ?? fileURLToPath(new URL(`../results/${stamp}.json`, import.meta.url));
  const log = (line: string): void => console.error(line);

  const runPg = values.only !== 'mysql';
  const runMysql = values.only !== 'pg';
  const info: MachineInfo = {
    startedAt: startedAt.toISOString(),
    nproc: availableParallelism(),
    loadAverage: loadavg(),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    servers: await serverVersions(runPg, runMysql),
    options: { ...sizes, only: values.only ?? 'all', quick: values.quick },
  };
  log(
    `asynccmd bench: ${values.quick ? 'quick' : 'full'} run, ${repeats} repeat(s), load ${info.loadAverage[0]?.toFixed(2)}`,
  );
  const rec = new Recorder(log);
  const began = performance.now();
  if (runPg) await benchPostgres(sizes, rec, log);
  if (runMysql) await benchMysql(sizes, rec, log);
  const finished = {
    ...info,
    options: {
      ...info.options,
      elapsedSeconds: Math.round((performance.now() - began) / 1000),
      loadAverageAtEnd: loadavg(),
    },
  };
  console.log(renderReport(finished, rec.measurements, rec.comparisons));
  await writeJson(out, finished, rec.measurements, rec.comparisons);
  console.log(`\nJSON: ${out}`);
  if (rec.measurements.some((m) => m.errors.length > 0)) process.exitCode = 1;
}

async function serverVersions(pg: boolean, mysql: boolean): Promise<Record<string, string>> {
  const servers: Record<string, string> = {};
  if (pg) {
    const pool = pgPool(1);
    try {
      servers['PostgreSQL'] = await pgVersion(pool);
    } finally {
      await pool.end();
    }
  }
  if (mysql) {
    const pool = mysqlPool(1);
    try {
      servers['MySQL/MariaDB'] = await mysqlVersion(pool);
    } finally {
      await pool.end();
    }
  }
  return servers;
}

// Ctrl-C: exit through process 'exit', which kills every child the bench started.
process.on('SIGINT', () => process.exit(130));
process.on('SIGTERM', () => process.exit(143));

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  process.exit(1);
});
