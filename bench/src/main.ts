import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { mysqlPool, mysqlVersion } from './mysql.js';
import { pgPool, pgVersion } from './pg.js';
import { renderReport, writeJson, type MachineInfo } from './report.js';
import { lockMysql, lockPostgres, type RunLock } from './run-lock.js';
import { mysqlSuite } from './scenarios/mysql.js';
import { postgresSuite } from './scenarios/pg.js';
import { sqliteSuite } from './scenarios/sqlite.js';
import { Recorder, type Suite } from './scenarios/recorder.js';
import { DEFAULT_SCENARIOS, FULL, QUICK, SCENARIOS, type Scenario, type Sizes } from './scenarios/sizes.js';
import { writeSoakChart } from './soak/chart.js';
import { renderSoak, soakComparisons } from './soak/report.js';
import { runSoak, SUBMITTER_SETTINGS, type SoakDatabaseName, type SoakRun } from './soak/run.js';
import { SOAK_SYSTEMS, SOAK_VARIANTS } from './soak/windows.js';

const USAGE = `npm run bench [-- options]
  --only pg|mysql|sqlite  run one database's scenarios
  --scenarios LIST  comma-separated subset of drain,latency,submits,memory,effects,soak (default
                    drain,latency,submits; submits and memory run on PostgreSQL only; memory:
                    one consumer drains 1,000,000 commands (100,000 with --quick), peak RSS;
                    effects: drains at C=10 where each command inserts one row into an
                    application table, by a transactional executor, by a plain one in its own
                    transaction and, on PostgreSQL, by graphile-worker, beside the no-op drain;
                    not in the default: its runs are several times slower than no-op drains,
                    roughly 2 minutes more per repeat on a bench already past its budget);
                    soak: per variant (autovacuum on, off, a snapshot held 120 s in the middle) a
                    PostgreSQL server of the bench's own (initdb defaults), the drain rates measured
                    on it, then each system submitting at 70 % of the slowest for --soak-minutes
                    with a retention of 10 minutes: per minute (30 s when held) drained/s, backlog,
                    submit → start p99, size and dead tuples, a chart beside the JSON; runs once,
                    whatever --repeats; not in the default (1.5 hours per variant); on MariaDB
                    (--only mysql, or no --only) asynccmd alone on the shared server, variants
                    autovacuum (its configuration) and held
  --soak-minutes N  length of each soak run (default 30); with --quick the windows, the
                    5-minute spans, retention and hold shrink by N / 30
  --soak-rate N     submits/s of the soak instead of 70 % of the measured drain
  --soak-systems L  subset of asynccmd,graphile,pg-boss (default all)
  --soak-variants L subset of autovacuum,no-autovacuum,held (default all)
  --rows LIST       only these drain rows, by system key (asynccmd, graphile, workflow-graph,
                    batch-callback, fair-share, …; for development: ratios need their baselines)
  --quick           small sizes, one repeat (for development)
  --repeats N       repeat every scenario N times (default 2)
  --budget MIN      skip further repeats of a database once they would end past MIN minutes
                    from the start (default 9; the first repeat always runs)
  --out FILE        JSON result path (default bench/results/<timestamp>.json)`;

/**
 * `npm run bench`: runs the scenarios, prints the table of figures and ratios against the
 * baselines measured in the same run, and writes everything as JSON.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      only: { type: 'string' },
      scenarios: { type: 'string', default: DEFAULT_SCENARIOS.join(',') },
      quick: { type: 'boolean', default: false },
      rows: { type: 'string' },
      repeats: { type: 'string' },
      out: { type: 'string' },
      budget: { type: 'string', default: '9' },
      'soak-minutes': { type: 'string', default: '30' },
      'soak-rate': { type: 'string' },
      'soak-systems': { type: 'string', default: SOAK_SYSTEMS.join(',') },
      'soak-variants': { type: 'string', default: SOAK_VARIANTS.join(',') },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return console.log(USAGE);
  if (values.only !== undefined && !['pg', 'mysql', 'sqlite'].includes(values.only)) {
    throw new Error(`--only takes pg, mysql or sqlite\n${USAGE}`);
  }
  const scenarios = new Set<Scenario>();
  for (const name of values.scenarios.split(',')) {
    const scenario = SCENARIOS.find((s) => s === name.trim());
    if (scenario === undefined) throw new Error(`--scenarios takes ${SCENARIOS.join(',')}\n${USAGE}`);
    scenarios.add(scenario);
  }
  const base = values.quick ? QUICK : FULL;
  const repeats = values.repeats === undefined ? base.repeats : Number(values.repeats);
  if (!Number.isInteger(repeats) || repeats < 1)
    throw new Error(`--repeats takes a positive integer\n${USAGE}`);
  const rows = values.rows?.split(',').map((row) => row.trim());
  const sizes: Sizes = { ...base, repeats, ...(rows === undefined ? {} : { rows }) };
  const budgetMs = Number(values.budget) * 60_000;
  if (!(budgetMs > 0)) throw new Error(`--budget takes a positive number of minutes\n${USAGE}`);
  const startedAt = new Date();
  const stamp = startedAt.toISOString().replace(/[:.]/g, '-');
  const out = values.out ?? fileURLToPath(new URL(`../results/${stamp}.json`, import.meta.url));
  const log = (line: string): void => console.error(line);

  const soakMinutes = Number(values['soak-minutes']);
  if (!(soakMinutes > 0)) throw new Error(`--soak-minutes takes a positive number\n${USAGE}`);
  const soakRate = values['soak-rate'] === undefined ? undefined : Number(values['soak-rate']);
  if (soakRate !== undefined && !(soakRate > 0))
    throw new Error(`--soak-rate takes a positive number\n${USAGE}`);
  const soakSystems = listOf(values['soak-systems'], SOAK_SYSTEMS, '--soak-systems');
  const soakVariants = listOf(values['soak-variants'], SOAK_VARIANTS, '--soak-variants');
  const soakDatabases: SoakDatabaseName[] = !scenarios.has('soak')
    ? []
    : values.only === undefined
      ? ['PostgreSQL', 'MariaDB']
      : values.only === 'pg'
        ? ['PostgreSQL']
        : values.only === 'mysql'
          ? ['MariaDB']
          : [];
  const runSoakScenario = soakDatabases.length > 0;
  const runPg =
    (values.only === undefined || values.only === 'pg') && [...scenarios].some((name) => name !== 'soak');
  const anyOf = (...names: Scenario[]): boolean => names.some((name) => scenarios.has(name));
  const runMysql =
    (values.only === undefined || values.only === 'mysql') && anyOf('drain', 'latency', 'effects');
  const runSqlite =
    (values.only === undefined || values.only === 'sqlite') && anyOf('drain', 'latency', 'effects');
  const info: MachineInfo = {
    startedAt: startedAt.toISOString(),
    nproc: availableParallelism(),
    loadAverage: loadavg(),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    servers: await serverVersions(runPg, runMysql),
    options: {
      ...sizes,
      only: values.only ?? 'all',
      scenarios: [...scenarios],
      quick: values.quick,
      budgetMinutes: Number(values.budget),
      ...(runSoakScenario
        ? {
            soakMinutes,
            soakRate: soakRate ?? '70 % of the measured drain',
            soakSystems,
            soakVariants,
            soakDatabases,
          }
        : {}),
    },
  };
  log(
    `asynccmd bench: ${values.quick ? 'quick' : 'full'} run, ${repeats} repeat(s), load ${info.loadAverage[0]?.toFixed(2)}`,
  );
  const locks: RunLock[] = [];
  if (runPg) locks.push(await lockPostgres(log));
  if (runMysql) locks.push(await lockMysql(log));
  const rec = new Recorder(log);
  const began = performance.now();
  const suites: Suite[] = [];
  if (runPg) suites.push(postgresSuite(sizes, rec, scenarios));
  if (runMysql) suites.push(mysqlSuite(sizes, rec, scenarios));
  if (runSqlite) suites.push(sqliteSuite(sizes, rec, scenarios));
  const repeatsRun: Record<string, number> = {};
  const lastTook = new Map<Suite, number>();
  try {
    // Every database's first repeat runs before any second one, so a tight budget still covers all.
    for (let r = 1; r <= repeats; r++) {
      for (const suite of suites) {
        if (r > 1 && performance.now() - began + (lastTook.get(suite) ?? 0) > budgetMs) {
          log(`${suite.name}: repeat ${r} skipped (it would end past the ${values.budget}-minute budget)`);
          continue;
        }
        log(`${suite.name}, repeat ${r}/${repeats}`);
        const t0 = performance.now();
        await suite.repeat();
        lastTook.set(suite, performance.now() - t0);
        repeatsRun[suite.name] = r;
      }
    }
  } finally {
    for (const suite of suites) await suite.finish();
    for (const lock of locks) await lock.release();
  }
  // Last and once: for as long as it is told, on PostgreSQL servers of its own and the shared MariaDB.
  let soak: SoakRun[] = [];
  if (runSoakScenario) {
    const soakLock = soakDatabases.includes('MariaDB') ? await lockMysql(log) : null;
    try {
      soak = await runSoak(
        {
          minutes: soakMinutes,
          rate: soakRate,
          quick: values.quick,
          systems: soakSystems,
          variants: soakVariants,
          databases: soakDatabases,
        },
        log,
      );
    } finally {
      await soakLock?.release();
    }
  }
  rec.comparisons.push(...soakComparisons(soak));
  const finished: MachineInfo = {
    ...info,
    options: {
      ...info.options,
      repeatsRun,
      elapsedSeconds: Math.round((performance.now() - began) / 1000),
      loadAverageAtEnd: loadavg(),
    },
    notes: rec.notes,
  };
  console.log(renderReport(finished, rec.measurements, rec.comparisons));
  if (soak.length > 0) console.log(renderSoak(soak, SUBMITTER_SETTINGS));
  await writeJson(
    out,
    finished,
    rec.measurements,
    rec.comparisons,
    soak.length > 0 ? { soak: { submitter: SUBMITTER_SETTINGS, runs: soak } } : {},
  );
  console.log(`\nJSON: ${out}`);
  if (soak.length > 0) {
    const chart = await writeSoakChart(soak, out);
    console.log('file' in chart ? `soak chart: ${chart.file}` : `soak chart not drawn: ${chart.skipped}`);
  }
  if (rec.measurements.some((m) => m.errors.length > 0) || soak.some((r) => r.errors.length > 0))
    process.exitCode = 1;
}

/** A comma-separated subset of `all`; throws with the usage for anything else. */
function listOf<T extends string>(text: string, all: readonly T[], option: string): T[] {
  const picked = text.split(',').map((name) => {
    const found = all.find((a) => a === name.trim());
    if (found === undefined) throw new Error(`${option} takes ${all.join(',')}\n${USAGE}`);
    return found;
  });
  return [...new Set(picked)];
}

async function serverVersions(pg: boolean, mysql: boolean): Promise<Record<string, string>> {
  const servers: Record<string, string> = {};
  if (pg) servers['PostgreSQL'] = await askVersion('PostgreSQL', 'mysql', pgPool(1), pgVersion);
  if (mysql) servers['MySQL/MariaDB'] = await askVersion('MySQL/MariaDB', 'pg', mysqlPool(1), mysqlVersion);
  return servers;
}

/** The server's version; an unreachable server stops the bench at once with a hint. */
async function askVersion<P extends { end(): Promise<void> }>(
  name: string,
  other: string,
  pool: P,
  version: (pool: P) => Promise<string>,
): Promise<string> {
  try {
    return await version(pool);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new Error(`${name} is unreachable (${why}); start it, or run only the other one: --only ${other}`);
  } finally {
    await pool.end();
  }
}

// Ctrl-C: exit through process 'exit', which kills every child the bench started.
process.on('SIGINT', () => process.exit(130));
process.on('SIGTERM', () => process.exit(143));

// A peer library may leave a timer or socket open after its own shutdown; the bench is done here.
main().then(
  () => process.exit(),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  },
);
