import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidArgumentError } from '@asynccmd/core';
import { checkSchemaName, dialectOf, generatedSchemaName, type DatabaseTarget } from './db/database.js';

export interface DemoConfig {
  readonly port: number;
  /** Only the default port may move to a free one when taken; a port asked for is that port. */
  readonly movePortIfTaken: boolean;
  readonly orders: number;
  readonly concurrency: number;
  readonly load: boolean;
  readonly exitAfterLoad: boolean;
  /** Stop gracefully when stdin closes: a child process then never outlives its parent. */
  readonly exitWithParent: boolean;
  /**
   * Where the orders and the commands live: a SQLite file (a fresh one in a temp directory unless
   * given), or a schema (PostgreSQL) / database (MySQL) on the server of a --db URL.
   */
  readonly database: DatabaseTarget;
  /** Made for this run, so removed when it stops: a fresh SQLite file, or a generated schema name. */
  readonly freshDb: boolean;
  /** Multiplies every downstream latency (the experiment's child process runs slow on purpose). */
  readonly latencyScale: number;
  /** Multiplies every downstream failure rate (0: nothing fails). */
  readonly failureScale: number;
  readonly seed: number;
}

export class ConfigError extends Error {}

const HELP = `npm start -- [options]
  --port N            HTTP port on 127.0.0.1 (env PORT; default 3000, or a free one when 3000 is taken)
  --orders N          orders of the built-in load (env DEMO_ORDERS; default 300)
  --concurrency N     concurrent load clients (default 16)
  --no-load           skip the built-in load
  --exit-after-load   stop gracefully after the summary (for CI and tests)
  --exit-with-parent  stop gracefully when stdin closes (child processes of the experiment)
  --db FILE|URL       SQLite file, postgres://… or mysql://… (env DEMO_DB; default: a fresh SQLite
                      file in a temp directory, removed at exit)
  --schema NAME       on PostgreSQL the schema, on MySQL/MariaDB the database for the orders and the
                      commands (created when missing, kept at exit); default a generated one, dropped at exit
  --latency-scale X   multiply the simulated downstream latency (default 1)
  --failure-scale X   multiply the simulated downstream failure rates (default 1; 0: nothing fails)
  --seed N            seed of the request mix and the downstream dice (default 42)`;

export function helpText(): string {
  return HELP;
}

/** Flags win over environment variables; unknown flags are refused with the help text. */
export function parseConfig(
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): DemoConfig | 'help' {
  const values = new Map<string, string>();
  const flags = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--help' || arg === '-h') return 'help';
    if (arg === '--no-load' || arg === '--exit-after-load' || arg === '--exit-with-parent') {
      flags.add(arg);
      continue;
    }
    const [name, inline] = arg.split('=', 2) as [string, string | undefined];
    if (
      ![
        '--port',
        '--orders',
        '--concurrency',
        '--db',
        '--schema',
        '--latency-scale',
        '--failure-scale',
        '--seed',
      ].includes(name)
    ) {
      throw new ConfigError(`unknown option ${arg}\n\n${HELP}`);
    }
    const value = inline ?? argv[++i];
    if (value === undefined) throw new ConfigError(`${name} needs a value`);
    values.set(name, value);
  }
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const text = values.get(name) ?? fallback.toString();
    const n = Number(text);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new ConfigError(`${name} must be an integer from ${min} to ${max}, not ${text}`);
    return n;
  };
  const scale = Number(values.get('--latency-scale') ?? '1');
  if (!(scale > 0 && scale <= 100)) throw new ConfigError('--latency-scale must be a number in (0, 100]');
  const failureScale = Number(values.get('--failure-scale') ?? '1');
  if (!(failureScale >= 0 && failureScale <= 100))
    throw new ConfigError('--failure-scale must be a number in [0, 100]');
  const given = values.get('--db') ?? env.DEMO_DB;
  const schema = values.get('--schema');
  let database: DatabaseTarget;
  let freshDb: boolean;
  if (given !== undefined && dialectOf(given) !== 'sqlite') {
    try {
      database = {
        dialect: dialectOf(given) as 'postgres' | 'mysql',
        url: given,
        schema: schema === undefined ? generatedSchemaName() : checkSchemaName(schema),
      };
    } catch (e) {
      if (e instanceof InvalidArgumentError) throw new ConfigError(`--schema: ${e.message}`);
      throw e;
    }
    freshDb = schema === undefined;
  } else {
    if (schema !== undefined) throw new ConfigError('--schema needs a postgres:// or mysql:// --db');
    database = {
      dialect: 'sqlite',
      file: given ?? join(mkdtempSync(join(tmpdir(), 'asynccmd-demo-')), 'orders.db'),
    };
    freshDb = given === undefined;
  }
  return {
    port: int('--port', Number(env.PORT ?? 3000), 0, 65_535),
    movePortIfTaken: !values.has('--port') && env.PORT === undefined,
    orders: int('--orders', Number(env.DEMO_ORDERS ?? 300), 0, 100_000),
    concurrency: int('--concurrency', 16, 1, 1_000),
    load: !flags.has('--no-load'),
    exitAfterLoad: flags.has('--exit-after-load'),
    exitWithParent: flags.has('--exit-with-parent'),
    database,
    freshDb,
    latencyScale: scale,
    failureScale,
    seed: int('--seed', 42, 0, 2 ** 31),
  };
}
