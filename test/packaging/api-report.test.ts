import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

it('the public surface of every package is the one recorded in api/ (node scripts/api-report.mjs)', () => {
  const run = spawnSync(process.execPath, ['scripts/api-report.mjs', '--check'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
});
