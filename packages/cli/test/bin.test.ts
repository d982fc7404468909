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

  it('exits 2 for a malformed server URL, before any driver sees it', () => {
    for (const url of [
      'postgres://[::1',
      'postgres://u@127.0.0.1:99999/db',
      'mysql://root@127.0.0.1:99999/test',
    ]) {
      const malformed = run('--db', url, 'stats');
      expect(malformed.status, url).toBe(2);
      expect(malformed.stderr, url).toContain('is not a well-formed URL');
    }
    const listen = run('--db', 'postgres://127.0.0.1/test', '--listen-db', 'postgres://[::1', 'stats');
    expect(listen.status).toBe(2);
    expect(listen.stderr).toContain('--listen-db "postgres://[::1" is not a well-formed URL');
  });

  it("keeps pg's multi-line sslmode SECURITY WARNING out of the output: one line of its own instead", () => {
    // The local server speaks no TLS: the command fails (exit 1) after pg has read the URL.
    const tls = run('--db', 'postgres://postgres@127.0.0.1:5432/test?sslmode=require', 'stats');
    expect(tls.status).toBe(1);
    expect(tls.stderr).not.toContain('SECURITY WARNING');
    expect(tls.stderr.trim().split('\n')).toEqual([
      'asynccmd: note: pg treats sslmode=prefer, require and verify-ca as verify-full (the server certificate is verified)',
      expect.stringContaining('asynccmd: cannot reach the database'),
    ]);
  });

  it('takes a --type of at most 128 characters in list, as pause does', () => {
    const db = `sqlite:${join(dir, 'types.db')}`;
    expect(run('--db', db, 'migrate').status).toBe(0);
    expect(run('--db', db, 'list', '--type', 't'.repeat(128)).status).toBe(0);
    for (const command of ['list', 'pause']) {
      const long = run('--db', db, command, ...(command === 'list' ? ['--type'] : []), 't'.repeat(129));
      expect(long.status, command).toBe(2);
      expect(long.stderr, command).toContain('128');
    }
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
