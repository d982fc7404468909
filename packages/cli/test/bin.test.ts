import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// The built entry point, as npm links it (`npm test` builds first).
const MAIN = join(dirname(fileURLToPath(import.meta.url)), '../dist/main.js');
const REPOSITORY = join(dirname(fileURLToPath(import.meta.url)), '../../..');

describe('the asynccmd executable', () => {
  const dir = mkdtempSync(join(tmpdir(), 'asynccmd-bin-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const run = (...args: string[]) => spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8' });

  it('runs as a process: exit codes and output', () => {
    const db = `sqlite:${join(dir, 'bin.db')}`;
    expect(run('--db', db, 'migrate')).toMatchObject({
      status: 0,
      stdout: expect.stringContaining('migrated'),
    });
    const stats = run('--db', db, 'stats', '--json');
    expect(stats.status).toBe(0);
    expect(JSON.parse(stats.stdout).total).toBe(0);
    const bad = run('--db', db, 'show', 'nope');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('is not a command id');
    expect(run('--version')).toMatchObject({ status: 0, stdout: expect.stringMatching(/^\d+\.\d+\.\d+/) });
  });

  it('exits 1 for a database problem and 2 for bad usage, as a process too', () => {
    const missing = run('--db', `sqlite:${join(dir, 'missing.db')}`, 'stats');
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain('run "asynccmd migrate" to create it');
    expect(run('--db', `sqlite:${join(dir, 'missing.db')}`, 'stats', '--colour').status).toBe(2);
  });

  it('runs from the repository root with `npx asynccmd`, as the README says', () => {
    const npx = spawnSync('npx', ['--offline', '--no-install', 'asynccmd', '--help'], {
      cwd: REPOSITORY,
      encoding: 'utf8',
      env: { ...process.env, npm_config_update_notifier: 'false' },
    });
    expect(npx.stderr).toBe('');
    expect(npx.status).toBe(0);
    expect(npx.stdout).toContain('Usage: asynccmd [options] [command]');
  });
});
