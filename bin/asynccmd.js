#!/usr/bin/env node
// `npx asynccmd …` in a checkout of this repository: the CLI of packages/cli, which
// `npm install` builds (the root package's prepare script; `npm run build` does it again).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = new URL('../packages/cli/dist/main.js', import.meta.url);
if (existsSync(fileURLToPath(main))) {
  await import(main.href);
} else {
  process.stderr.write('asynccmd: the CLI is not built yet: run `npm run build` in the repository first\n');
  process.exitCode = 1;
}
