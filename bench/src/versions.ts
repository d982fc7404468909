import { readFileSync } from 'node:fs';

/** The exact versions of the peers the bench measures, as bench/package.json pins them. */
function pinned(): Record<string, string> {
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    devDependencies?: Record<string, string>;
  };
  return manifest.devDependencies ?? {};
}

const versions = pinned();

/** `name version`, e.g. "graphile-worker 0.18.0". */
export function peer(name: string): string {
  const version = versions[name];
  return version === undefined ? name : `${name} ${version}`;
}
