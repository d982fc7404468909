import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Libraries only a subpath may load; none of them, nor a database driver, is the main entry's. */
const OPTIONAL = ['inversify', 'reflect-metadata', 'prom-client', '@opentelemetry/api'];
const DRIVERS = ['pg', 'mysql2', 'better-sqlite3'];
const DEPENDENCIES = Object.keys(
  (JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')) as { dependencies: object }).dependencies,
);

// Every module a fresh Node process resolves, as a module hook sees it (CommonJS packages that an
// ES module imports included), one `resolved <url>` line each on stderr.
const HOOKS = `export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  process.stderr.write('resolved ' + result.url + '\\n');
  return result;
}`;
const REGISTER = `import { register } from 'node:module';
register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOKS)}`)});`;

/** Imports `specifier` (as a user of the built package would) in a fresh process. */
function importFresh(specifier: string): { packages: Set<string>; reflectMetadata: string } {
  const script = `await import(${JSON.stringify(specifier)});
console.log(JSON.stringify({ reflectMetadata: typeof Reflect.getMetadata }));`;
  const child = spawnSync(
    process.execPath,
    ['--import', `data:text/javascript,${encodeURIComponent(REGISTER)}`, '--input-type=module', '-e', script],
    { cwd: PACKAGE, encoding: 'utf8' },
  );
  expect(child.status, child.stderr).toBe(0);
  const packages = new Set<string>();
  for (const line of child.stderr.split('\n')) {
    const at = /^resolved file:\/\/.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(line);
    if (at?.[1] !== undefined) packages.add(at[1]);
  }
  return {
    packages,
    reflectMetadata: (JSON.parse(child.stdout) as { reflectMetadata: string }).reflectMetadata,
  };
}

describe('the main entry of @asynccmd/runtime', () => {
  it('loads no DI container, metrics or tracing library and no driver, and sets no global', () => {
    const main = importFresh('@asynccmd/runtime');
    expect([...main.packages].filter((name) => !DEPENDENCIES.includes(name))).toEqual([]);
    for (const name of [...OPTIONAL, ...DRIVERS]) expect(main.packages).not.toContain(name);
    expect(main.reflectMetadata).toBe('undefined');
  });

  it('leaves each optional library to the subpath that needs it', () => {
    expect(importFresh('@asynccmd/runtime/metrics').packages).toContain('prom-client');
    expect(importFresh('@asynccmd/runtime/tracing').packages).toContain('@opentelemetry/api');
    const inversify = importFresh('@asynccmd/runtime/inversify');
    expect(inversify.packages).toContain('inversify');
    expect(inversify.reflectMetadata).toBe('function');
    for (const subpath of ['ops', 'test-kit']) {
      const { packages } = importFresh(`@asynccmd/runtime/${subpath}`);
      for (const name of [...OPTIONAL, ...DRIVERS]) expect(packages).not.toContain(name);
    }
  });
});
