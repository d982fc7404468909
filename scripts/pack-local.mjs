#!/usr/bin/env node
// `npm run pack:local [-- <folder>]`: builds the workspace, packs every published package
// (`npm pack`) into one folder (default .tmp/packages) and prints the `npm install` line of an
// application on each database. Until the packages are on the registry, this is how an
// application installs them: @asynccmd/core comes as a tarball too, since nothing else provides it.
import { spawnSync } from 'node:child_process';
import console from 'node:console';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const destination = resolve(process.argv[2] ?? join(ROOT, '.tmp/packages'));

/**
 * The application of one database: its adapter, the packages of ours that adapter depends on (not
 * on the registry yet either), and its driver.
 */
const APPLICATIONS = [
  { label: 'PostgreSQL', adapter: '@asynccmd/adapter-postgres', driver: 'pg' },
  { label: 'MySQL/MariaDB', adapter: '@asynccmd/adapter-mysql', driver: 'mysql2' },
  { label: 'SQLite', adapter: '@asynccmd/adapter-sqlite', driver: 'better-sqlite3' },
  {
    label: 'PGlite',
    adapter: '@asynccmd/adapter-pglite',
    needs: ['@asynccmd/adapter-postgres'],
    driver: '@electric-sql/pglite',
  },
];

function fail(message) {
  console.error(`pack:local: ${message}`);
  process.exit(1);
}

function mustRun(command, args) {
  const result = spawnSync(command, args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.error) fail(`${command} could not start: ${result.error.message}`);
  if (result.status !== 0) fail(`${command} ${args.join(' ')} exited ${result.status}\n${result.stderr}`);
  return result.stdout;
}

/** A path as a shell word: quoted only when it needs to be. */
const shellWord = (path) => (/^[\w@%+=:,./-]+$/.test(path) ? path : `'${path.replaceAll("'", `'\\''`)}'`);

const published = readdirSync(join(ROOT, 'packages'))
  .map((dir) => join('packages', dir))
  .filter((dir) => existsSync(join(ROOT, dir, 'package.json')))
  .filter((dir) => JSON.parse(readFileSync(join(ROOT, dir, 'package.json'), 'utf8')).private !== true);

mustRun(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b']);
mkdirSync(destination, { recursive: true });
const packs = JSON.parse(
  mustRun('npm', [
    'pack',
    '--json',
    '--pack-destination',
    destination,
    ...published.flatMap((dir) => ['--workspace', dir]),
  ]),
);
const tarballOf = new Map(packs.map((pack) => [pack.name, join(destination, pack.filename)]));
const tarball = (name) => {
  const path = tarballOf.get(name);
  if (path === undefined) fail(`${name} was not packed`);
  return shellWord(path);
};

const shown = relative(process.cwd(), destination) || '.';
console.log(`Packed ${packs.length} packages into ${shown.startsWith('..') ? destination : shown}.`);
console.log('');
console.log('Install the runtime and the adapter of your database in your application with:');
const width = Math.max(...APPLICATIONS.map((app) => app.label.length)) + 1;
for (const app of APPLICATIONS) {
  const specs = ['@asynccmd/core', '@asynccmd/runtime', ...(app.needs ?? []), app.adapter].map(tarball);
  console.log(`  ${`${app.label}:`.padEnd(width)} npm install ${[...specs, app.driver].join(' ')}`);
}
const others = packs
  .map((pack) => pack.name)
  .filter(
    (name) => !['@asynccmd/core', '@asynccmd/runtime', ...APPLICATIONS.map((a) => a.adapter)].includes(name),
  );
console.log('');
console.log('and any of the others the same way (the CLI and the test kit with --save-dev):');
const nameWidth = Math.max(...others.map((name) => name.length));
for (const name of others) console.log(`  ${name.padEnd(nameWidth)}  ${tarball(name)}`);
