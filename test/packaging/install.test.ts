import { spawn } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { programsOf } from '../docs/doc-blocks.js';

/**
 * What a new user installs: every published package packed (`npm pack`, after the build),
 * installed from the tarballs into a scratch project of its own with one database's adapter and
 * driver, the README examples compiled against the installed copies by strict TypeScript (the
 * README's own text: its ```ts blocks, in order, as one program), and the adapter README's program
 * run against the real database. The `asynccmd` CLI the same way, with no adapter for the URL.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');
const PACK_LOCAL = join(ROOT, 'scripts/pack-local.mjs');
const require = createRequire(import.meta.url);
const PG_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/test';
const MYSQL_SERVER_URL = 'mysql://root@127.0.0.1:3306';
/** Other checkouts run this file at the same time on the same servers. */
const DATABASE = `asynccmd_pkg_${process.pid}`;
const INSTALL_TIMEOUT_MS = 240_000;

/** Libraries a user of one database must not get: other drivers, the optional peers of the runtime. */
const FOREIGN = [
  'better-sqlite3',
  'mysql2',
  'pg',
  'inversify',
  'reflect-metadata',
  'prom-client',
  '@opentelemetry/api',
];

interface PackedFile {
  readonly path: string;
}
interface Packed {
  readonly name: string;
  readonly filename: string;
  readonly files: readonly PackedFile[];
}
interface Manifest {
  readonly name: string;
  readonly private?: boolean;
  readonly repository?: { readonly url?: string; readonly directory?: string };
  readonly engines?: { readonly node?: string };
  readonly files?: readonly string[];
  readonly license?: string;
  readonly dependencies?: Readonly<Record<string, string>>;
  readonly peerDependencies?: Readonly<Record<string, string>>;
  readonly peerDependenciesMeta?: Readonly<Record<string, { readonly optional?: boolean }>>;
}

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The environment of a user's shell: none of the npm_* settings of the `npm test` running this. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { npm_config_update_notifier: 'false', ...extra };
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(key) && key !== 'INIT_CWD' && !(key in env)) env[key] = value;
  }
  return env;
}

function run(command: string, args: readonly string[], cwd: string, env = userEnv()): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

async function mustRun(
  command: string,
  args: readonly string[],
  cwd: string,
  env?: NodeJS.ProcessEnv,
): Promise<Run> {
  const result = await run(command, args, cwd, env);
  if (result.code !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited ${result.code}\n${result.stdout}\n${result.stderr}`);
  }
  return result;
}

const manifestOf = (dir: string): Manifest =>
  JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;

/**
 * The README's examples as the doc test reads them (test/docs/doc-blocks.ts): each block a module,
 * or one program with the blocks that continue it. These READMEs assume nothing a prelude gives.
 */
function readmePrograms(file: string): string[] {
  const readme = relative(ROOT, file);
  const programs = programsOf(readFileSync(file, 'utf8'), readme);
  expect(programs.length, `${readme} has no ts example`).toBeGreaterThan(0);
  for (const program of programs) expect(program.preludes, `${program.name} takes a prelude`).toEqual([]);
  return programs.map((program) => program.source);
}

/** The README's example: one program. */
function readmeProgram(file: string): string {
  const programs = readmePrograms(file);
  expect(programs.length, `${file}: its blocks are one program (doctest: continues)`).toBe(1);
  return programs[0] ?? '';
}

/** Every package directory below node_modules, nested ones included. */
function installedPackages(nodeModules: string): string[] {
  const found: string[] = [];
  const walk = (dir: string, prefix: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory() || entry.name.startsWith('.')) continue;
      const path = join(dir, entry.name);
      if (entry.name.startsWith('@') && prefix === '') {
        walk(path, `${entry.name}/`);
        continue;
      }
      if (existsSync(join(path, 'package.json'))) found.push(`${prefix}${entry.name}`);
      if (existsSync(join(path, 'node_modules'))) walk(join(path, 'node_modules'), '');
    }
  };
  walk(nodeModules, '');
  return found;
}

function bytesBelow(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) total += bytesBelow(path);
    else if (entry.isFile()) total += statSync(path).size;
  }
  return total;
}

/** A scratch project: its own directory, a package.json, and a strict NodeNext tsconfig. */
function scratchProject(name: string, compilerOptions: Record<string, unknown> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), `asynccmd-${name}-`));
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: `scratch-${name}`, private: true, type: 'module' }),
  );
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        skipLibCheck: false,
        outDir: 'out',
        ...compilerOptions,
      },
      include: ['*.ts'],
    }),
  );
  return dir;
}

describe('the packages as a user installs them', () => {
  let work: string;
  const packedFiles: Packed[] = [];
  let publishedDirs: string[] = [];
  const packed = new Map<string, string>();
  const scratches: string[] = [];
  const figures: string[] = [];

  const tarballs = (...names: string[]): string[] =>
    names.map((name) => {
      const tarball = packed.get(name);
      if (tarball === undefined) throw new Error(`${name} was not packed`);
      return tarball;
    });

  /** npm install into `dir`; checks and reports what came with it. */
  const install = async (
    dir: string,
    label: string,
    specs: readonly string[],
    extra: readonly string[] = [],
  ) => {
    const started = performance.now();
    await mustRun('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', ...extra, ...specs], dir);
    const seconds = (performance.now() - started) / 1000;
    const packages = installedPackages(join(dir, 'node_modules'));
    const megabytes = bytesBelow(join(dir, 'node_modules')) / 1e6;
    figures.push(
      `${label}: ${packages.length} packages, ${megabytes.toFixed(1)} MB, ${seconds.toFixed(1)} s`,
    );
    return packages;
  };

  /** Each database's `npm install` line as `npm run pack:local` printed it, without `npm install`. */
  const installLines = new Map<string, string[]>();
  let packOutput = '';

  beforeAll(async () => {
    // The packs are the ones `npm run pack:local` makes (it builds first): what a user of this
    // repository installs until the packages are published.
    work = mkdtempSync(join(tmpdir(), 'asynccmd-packs-'));
    packOutput = (await mustRun(process.execPath, [PACK_LOCAL, work], ROOT)).stdout;
    for (const [, label, line] of packOutput.matchAll(/^ {2}(\S+): +npm install (.+)$/gm)) {
      if (label !== undefined && line !== undefined) installLines.set(label, line.split(' '));
    }
    const published = readdirSync(join(ROOT, 'packages'))
      .map((dir) => `packages/${dir}`)
      .filter(
        (dir) => existsSync(join(ROOT, dir, 'package.json')) && manifestOf(join(ROOT, dir)).private !== true,
      );
    for (const filename of readdirSync(work).filter((f) => f.endsWith('.tgz'))) {
      const tarball = join(work, filename);
      const listing = await mustRun('tar', ['-tzf', tarball], work);
      const files = listing.stdout
        .split('\n')
        .filter((entry) => entry.startsWith('package/') && !entry.endsWith('/'))
        .map((entry) => ({ path: entry.slice('package/'.length) }));
      const manifest = JSON.parse(
        (await mustRun('tar', ['-xOzf', tarball, 'package/package.json'], work)).stdout,
      ) as Manifest;
      packedFiles.push({ name: manifest.name, filename, files });
      packed.set(manifest.name, tarball);
    }
    publishedDirs = published;
  }, INSTALL_TIMEOUT_MS);

  /** The tarballs of a database's printed install line, and its driver at `driverSpec`. */
  const printedInstall = (label: string, driver: string, driverSpec: string): string[] => {
    const specs = installLines.get(label);
    if (specs === undefined) throw new Error(`pack:local printed no line for ${label}:\n${packOutput}`);
    expect(specs.at(-1)).toBe(driver);
    return [...specs.slice(0, -1), driverSpec];
  };

  afterAll(async () => {
    console.log(`installs from the tarballs:\n  ${figures.join('\n  ')}`);
    for (const dir of [work, ...scratches]) if (dir) rmSync(dir, { recursive: true, force: true });
    const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${DATABASE}`).finally(() => admin.end());
    const conn = await mysql.createConnection(MYSQL_SERVER_URL);
    await conn.query(`DROP DATABASE IF EXISTS ${DATABASE}`).finally(() => conn.end());
  }, INSTALL_TIMEOUT_MS);

  it('every package has a README, a LICENSE, its repository, engines, files, ranges, and maps of shipped files', () => {
    expect(publishedDirs.length).toBeGreaterThanOrEqual(8);
    for (const dir of publishedDirs) {
      const manifest = manifestOf(join(ROOT, dir));
      const pack = packedFiles.find((p) => p.name === manifest.name);
      expect(pack, `${manifest.name} was packed`).toBeDefined();
      const files = new Set(pack?.files.map((f) => f.path));
      expect([...files].filter((f) => f === 'README.md' || f === 'LICENSE').sort(), manifest.name).toEqual([
        'LICENSE',
        'README.md',
      ]);
      expect(manifest.license).toBe('MIT');
      expect(manifest.repository).toEqual({
        type: 'git',
        url: 'git+https://github.com/asynccmd/asynccmd.git',
        directory: dir,
      });
      expect(manifest.engines?.node, manifest.name).toBe('>=20.19');
      expect(manifest.files, manifest.name).toBeDefined();
      // Ranges, never exact pins: an exact pin installs a second copy beside the user's.
      for (const [dep, range] of Object.entries({ ...manifest.dependencies, ...manifest.peerDependencies })) {
        expect(range, `${manifest.name} → ${dep}`).toMatch(/^(\^|>=)\d/);
      }
      for (const file of files) {
        expect(file.endsWith('.tsbuildinfo'), `${manifest.name} ships ${file}`).toBe(false);
        if (!file.endsWith('.map')) continue;
        const map = JSON.parse(readFileSync(join(ROOT, dir, file), 'utf8')) as { sources: string[] };
        for (const source of map.sources) {
          const shipped = posix.normalize(posix.join(posix.dirname(file), source));
          expect(
            files.has(shipped),
            `${manifest.name}: ${file} points at ${shipped}, which is not shipped`,
          ).toBe(true);
        }
      }
      // A compiled file without its source is a stale build output that would be published.
      for (const file of files) {
        const js = /^dist\/(.*)\.js$/.exec(file);
        if (js) expect(files.has(`src/${js[1]}.ts`), `${manifest.name}: ${file} has no source`).toBe(true);
      }
    }
  });

  it("npm run pack:local packs every published package into one folder and prints each database's install line", () => {
    expect(
      readdirSync(work)
        .filter((f) => f.endsWith('.tgz'))
        .sort(),
    ).toEqual(publishedDirs.map((dir) => `asynccmd-${dir.slice('packages/'.length)}-0.1.0.tgz`).sort());
    const line = (...adapters: string[]) =>
      ['core', 'runtime', ...adapters].map((p) => join(work, `asynccmd-${p}-0.1.0.tgz`));
    expect(Object.fromEntries(installLines)).toEqual({
      PostgreSQL: [...line('adapter-postgres'), 'pg'],
      'MySQL/MariaDB': [...line('adapter-mysql'), 'mysql2'],
      SQLite: [...line('adapter-sqlite'), 'better-sqlite3'],
      // adapter-pglite runs adapter-postgres's engine: its tarball comes along.
      PGlite: [...line('adapter-postgres', 'adapter-pglite'), '@electric-sql/pglite'],
    });
    // The other packages, each with its tarball, for the CLI, the test kit and the ORM bridges.
    for (const name of [
      'cli',
      'testing',
      'knex',
      'kysely',
      'drizzle',
      'typeorm',
      'prisma',
      'store-conformance',
    ]) {
      expect(packOutput).toMatch(
        new RegExp(`^ {2}@asynccmd/${name} +${join(work, `asynccmd-${name}-0.1.0.tgz`)}$`, 'm'),
      );
    }
  });

  it(
    'a PostgreSQL-only user: runtime + adapter-postgres + pg 8.11, the README compiles and its program runs',
    async () => {
      const dir = scratchProject('postgres');
      scratches.push(dir);
      const installed = await install(
        dir,
        'PostgreSQL only (runtime, adapter-postgres, pg 8.11, @types/pg 8.10)',
        [...printedInstall('PostgreSQL', 'pg', 'pg@8.11'), '@types/pg@8.10', '@types/node@20'],
      );
      for (const name of FOREIGN.filter((n) => n !== 'pg')) expect(installed).not.toContain(name);
      // One pg, the user's: the adapter's types and runtime are the application's copy.
      expect(installed.filter((name) => name === 'pg')).toEqual(['pg']);
      expect(manifestOf(join(dir, 'node_modules/pg')).name).toBe('pg');
      expect(JSON.parse(readFileSync(join(dir, 'node_modules/pg/package.json'), 'utf8')).version).toMatch(
        /^8\.11\./,
      );

      writeFileSync(join(dir, 'readme.ts'), readmeProgram(join(ROOT, 'packages/adapter-postgres/README.md')));
      writeFileSync(join(dir, 'entry.ts'), MAIN_ENTRY_CHECK);
      await mustRun(process.execPath, [TSC, '-p', '.'], dir);

      const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
      await admin.connect();
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${DATABASE}`);
        await admin.query(`CREATE DATABASE ${DATABASE}`);
      } finally {
        await admin.end();
      }
      const url = `postgres://postgres@127.0.0.1:5432/${DATABASE}`;
      const entry = await mustRun(process.execPath, ['out/entry.js'], dir, userEnv({ DATABASE_URL: url }));
      expect(JSON.parse(entry.stdout)).toEqual({
        reflectMetadata: false,
        resolvable: [],
        metrics: { status: 501, code: 'METRICS_UNAVAILABLE' },
      });
      const program = await mustRun(process.execPath, ['out/readme.js'], dir, userEnv({ DATABASE_URL: url }));
      expect(program.stdout).toContain('order o-42 (version 7): customer notified');
      expect(program.stdout).toContain('order o-42 (version 8): customer notified');
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query<{ status: string }>(
          // Finished commands move to the table's history (migration 21).
          `SELECT status FROM (SELECT id, status FROM public.async_command
             UNION ALL SELECT id, status FROM public.async_command_history) AS c ORDER BY id`,
        );
        expect(rows.map((r) => r.status)).toEqual(['SUCCESS', 'SUCCESS']);
      } finally {
        await client.end();
      }
    },
    INSTALL_TIMEOUT_MS,
  );

  it(
    'a MySQL-only user: runtime + adapter-mysql + mysql2 3.9, the README compiles and its program runs',
    async () => {
      const dir = scratchProject('mysql');
      scratches.push(dir);
      const installed = await install(dir, 'MySQL only (runtime, adapter-mysql, mysql2 3.9)', [
        ...printedInstall('MySQL/MariaDB', 'mysql2', 'mysql2@3.9'),
        '@types/node@20',
      ]);
      for (const name of FOREIGN.filter((n) => n !== 'mysql2')) expect(installed).not.toContain(name);
      expect(installed.filter((name) => name === 'mysql2')).toEqual(['mysql2']);

      writeFileSync(join(dir, 'readme.ts'), readmeProgram(join(ROOT, 'packages/adapter-mysql/README.md')));
      await mustRun(process.execPath, [TSC, '-p', '.'], dir);

      const server = await mysql.createConnection(MYSQL_SERVER_URL);
      try {
        await server.query(`DROP DATABASE IF EXISTS ${DATABASE}`);
        await server.query(`CREATE DATABASE ${DATABASE}`);
      } finally {
        await server.end();
      }
      const url = `${MYSQL_SERVER_URL}/${DATABASE}`;
      const program = await mustRun(process.execPath, ['out/readme.js'], dir, userEnv({ DATABASE_URL: url }));
      expect(program.stdout).toContain('order o-42 (version 7): customer notified');
      expect(program.stdout).toContain('order o-42 (version 8): customer notified');
      const conn = await mysql.createConnection(url);
      try {
        const [rows] = await conn.query('SELECT status FROM async_command ORDER BY id');
        expect((rows as { status: string }[]).map((r) => r.status)).toEqual(['SUCCESS', 'SUCCESS']);
      } finally {
        await conn.end();
      }
    },
    INSTALL_TIMEOUT_MS,
  );

  it(
    'an SQLite-only user: runtime + adapter-sqlite + better-sqlite3, the README compiles and its program runs',
    async () => {
      const dir = scratchProject('sqlite');
      scratches.push(dir);
      // better-sqlite3's prebuilt binary cannot be downloaded here and a build from source takes
      // over a minute: install the workspace's version without its install script and give it the
      // workspace's binary, built for this Node.
      const workspaceDriver = dirname(require.resolve('better-sqlite3/package.json'));
      const { version } = manifestOf(workspaceDriver) as Manifest & { version: string };
      const installed = await install(
        dir,
        `SQLite only (runtime, adapter-sqlite, better-sqlite3 ${version}; its binary copied, not built)`,
        [
          ...printedInstall('SQLite', 'better-sqlite3', `better-sqlite3@${version}`),
          '@types/better-sqlite3@7.6',
          '@types/node@20',
        ],
        ['--ignore-scripts'],
      );
      for (const name of FOREIGN.filter((n) => n !== 'better-sqlite3')) expect(installed).not.toContain(name);
      const binary = 'build/Release/better_sqlite3.node';
      mkdirSync(dirname(join(dir, 'node_modules/better-sqlite3', binary)), { recursive: true });
      copyFileSync(join(workspaceDriver, binary), join(dir, 'node_modules/better-sqlite3', binary));

      writeFileSync(join(dir, 'readme.ts'), readmeProgram(join(ROOT, 'packages/adapter-sqlite/README.md')));
      await mustRun(process.execPath, [TSC, '-p', '.'], dir);
      const program = await mustRun(process.execPath, ['out/readme.js'], dir);
      expect(program.stdout).toContain('order o-42 (version 7): customer notified');
      const db = new Database(join(dir, 'app.db'), { readonly: true });
      try {
        // Finished commands move to the table's history (migration 20).
        expect(
          db
            .prepare(
              'SELECT status FROM (SELECT id, status FROM async_command UNION ALL SELECT id, status FROM async_command_history) ORDER BY id',
            )
            .pluck()
            .all(),
        ).toEqual(['SUCCESS']);
      } finally {
        db.close();
      }
    },
    INSTALL_TIMEOUT_MS,
  );

  it(
    'a PGlite-only user: runtime + adapter-pglite + PGlite 0.6 and no pg, the README compiles and its program runs',
    async () => {
      const dir = scratchProject('pglite');
      scratches.push(dir);
      const installed = await install(
        dir,
        'PGlite only (runtime, adapter-pglite, @electric-sql/pglite 0.6)',
        [
          ...printedInstall('PGlite', '@electric-sql/pglite', '@electric-sql/pglite@0.6'),
          // PGlite's declarations name Emscripten's types without depending on them (README).
          '@types/emscripten@1',
          '@types/node@20',
        ],
      );
      // The PostgreSQL engine comes with it, pg does not: PGlite is the driver.
      for (const name of FOREIGN) expect(installed).not.toContain(name);
      expect(installed).toContain('@asynccmd/adapter-postgres');
      expect(installed.filter((name) => name === '@electric-sql/pglite')).toEqual(['@electric-sql/pglite']);

      writeFileSync(join(dir, 'readme.ts'), readmeProgram(join(ROOT, 'packages/adapter-pglite/README.md')));
      await mustRun(process.execPath, [TSC, '-p', '.'], dir);
      const program = await mustRun(process.execPath, ['out/readme.js'], dir);
      expect(program.stdout).toContain('order o-42 (version 7): customer notified');
    },
    INSTALL_TIMEOUT_MS,
  );

  it(
    "an adapter's author: store-conformance + adapter-sqlite + vitest, the README's harness compiles and an area of the suite passes",
    async () => {
      const dir = scratchProject('conformance', { noEmit: true });
      scratches.push(dir);
      const workspaceDriver = dirname(require.resolve('better-sqlite3/package.json'));
      const { version } = manifestOf(workspaceDriver) as Manifest & { version: string };
      const vitest = (
        manifestOf(dirname(require.resolve('vitest/package.json'))) as Manifest & { version: string }
      ).version;
      await install(
        dir,
        `store conformance (store-conformance, adapter-sqlite, vitest ${vitest}; better-sqlite3's binary copied)`,
        [
          ...tarballs('@asynccmd/core', '@asynccmd/adapter-sqlite', '@asynccmd/store-conformance'),
          `better-sqlite3@${version}`,
          `vitest@${vitest}`,
          '@types/better-sqlite3@7.6',
          '@types/node@20',
        ],
        ['--ignore-scripts'],
      );
      const binary = 'build/Release/better_sqlite3.node';
      mkdirSync(dirname(join(dir, 'node_modules/better-sqlite3', binary)), { recursive: true });
      copyFileSync(join(workspaceDriver, binary), join(dir, 'node_modules/better-sqlite3', binary));

      writeFileSync(
        join(dir, 'conformance.test.ts'),
        readmeProgram(join(ROOT, 'packages/store-conformance/README.md')),
      );
      await mustRun(process.execPath, [TSC, '-p', '.'], dir);
      // One small area, as the README says to pick one: the whole suite is the adapters' own tests.
      const report = join(dir, 'report.json');
      await mustRun(
        process.execPath,
        [
          join(dir, 'node_modules/vitest/vitest.mjs'),
          'run',
          'conformance.test.ts',
          '-t',
          '^store conformance: sqlite purge ',
          '--reporter=json',
          `--outputFile=${report}`,
        ],
        dir,
      );
      const { numPassedTests, numFailedTests, testResults } = JSON.parse(readFileSync(report, 'utf8')) as {
        numPassedTests: number;
        numFailedTests: number;
        testResults: { assertionResults: { status: string; ancestorTitles: string[] }[] }[];
      };
      expect(numFailedTests).toBe(0);
      expect(numPassedTests).toBeGreaterThan(0);
      const ran = testResults.flatMap((f) => f.assertionResults).filter((t) => t.status === 'passed');
      expect(new Set(ran.map((t) => t.ancestorTitles.join(' > ')))).toEqual(
        new Set(['store conformance: sqlite > purge']),
      );
    },
    INSTALL_TIMEOUT_MS,
  );

  it(
    'the CLI: npx asynccmd --help works, a URL without its adapter names the packages to add, the runtime README compiles',
    async () => {
      const dir = scratchProject('cli', {
        experimentalDecorators: true,
        emitDecoratorMetadata: true,
        noEmit: true,
      });
      scratches.push(dir);
      await install(dir, "CLI with adapter-postgres, and the runtime subpaths' peers", [
        ...tarballs('@asynccmd/core', '@asynccmd/runtime', '@asynccmd/cli', '@asynccmd/adapter-postgres'),
        'pg@8.11',
        '@types/pg@8.10',
        '@types/node@20',
        'prom-client@15',
        '@opentelemetry/api@1',
        'inversify@8',
        'reflect-metadata@0.2',
      ]);
      const help = await mustRun('npx', ['--no-install', 'asynccmd', '--help'], dir);
      expect(help.stdout).toContain('Usage: asynccmd [options] [command]');

      for (const [url, hint] of [
        ['mysql://root@127.0.0.1:3306/test', 'npm install @asynccmd/adapter-mysql mysql2'],
        ['sqlite:app.db', 'npm install @asynccmd/adapter-sqlite better-sqlite3'],
      ] as const) {
        const missing = await run('npx', ['--no-install', 'asynccmd', '--db', url, 'stats'], dir);
        expect(missing.code, missing.stderr).toBe(1);
        expect(missing.stderr).toContain(hint);
        expect(missing.stderr).not.toMatch(/^\s+at /m); // no stack
      }

      writeFileSync(join(dir, 'runtime.ts'), readmeProgram(join(ROOT, 'packages/runtime/README.md')));
      // The core README's examples are modules of their own, each importing what it uses.
      readmePrograms(join(ROOT, 'packages/core/README.md')).forEach((program, i) =>
        writeFileSync(join(dir, `core-${i + 1}.ts`), program),
      );
      await mustRun(process.execPath, [TSC, '-p', '.'], dir);
    },
    INSTALL_TIMEOUT_MS,
  );
});

/**
 * Run in the PostgreSQL-only project: the runtime's main entry sets no global, the optional
 * libraries are not even resolvable there, and the admin handler's /metrics says so instead of
 * failing on a missing prom-client.
 */
const MAIN_ENTRY_CHECK = `import { request } from 'node:http';
import { createPostgresStore } from '@asynccmd/adapter-postgres';
import { startAdminServer } from '@asynccmd/runtime';

const optional = ['inversify', 'reflect-metadata', 'prom-client', '@opentelemetry/api', 'mysql2', 'better-sqlite3'];
const resolvable = optional.filter((name) => {
  try {
    import.meta.resolve(name);
    return true;
  } catch {
    return false;
  }
});
const store = createPostgresStore({ connectionString: process.env.DATABASE_URL });
const admin = await startAdminServer({ store, auth: 'none' });
const metrics = await new Promise<{ status: number; code: string }>((resolve, reject) => {
  request(admin.url + '/metrics', (res) => {
    let body = '';
    res.on('data', (chunk: Buffer) => (body += chunk.toString()));
    res.on('end', () => resolve({ status: res.statusCode ?? 0, code: (JSON.parse(body) as { error: { code: string } }).error.code }));
  }).on('error', reject).end();
});
await admin.close();
await store.close();
console.log(JSON.stringify({ reflectMetadata: 'getMetadata' in Reflect, resolvable, metrics }));
`;
