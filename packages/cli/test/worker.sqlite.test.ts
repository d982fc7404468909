import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqlite } from '../../runtime/test/ops/databases.js';
import { CLI_MAIN, WORKER_FIXTURES } from './worker-process.js';
import { describeWorker } from './worker.suite.js';

describeWorker('SQLite', openSqlite);

describe('asynccmd worker refuses what it cannot run', () => {
  const run = (args: string[], env: Record<string, string> = {}) =>
    spawnSync(process.execPath, [CLI_MAIN, ...args], { encoding: 'utf8', env: { ...process.env, ...env } });
  const executors = join(WORKER_FIXTURES, 'worker-executors.mjs');

  it.each<[string, string[], number, string]>(
    withStatusInName([
      [
        'a pool size of 0',
        ['--db', 'sqlite::memory:', 'worker', '--executors', executors, '--concurrency', '0'],
        2,
        '--concurrency must be',
      ],
      [
        'a --pools entry without a size',
        ['--db', 'sqlite::memory:', 'worker', '--executors', executors, '--pools', 'emails'],
        2,
        '--pools takes',
      ],
      [
        '--admin-port without a token',
        ['--db', 'sqlite::memory:', 'worker', '--executors', executors, '--admin-port', '9464'],
        2,
        'ASYNCCMD_ADMIN_TOKEN',
      ],
      [
        'a module file that is not there',
        ['--db', 'sqlite::memory:', 'worker', '--executors', 'no/such/module.mjs'],
        2,
        '--executors: no file',
      ],
      ['no --executors', ['--db', 'sqlite::memory:', 'worker'], 2, "required option '--executors <module>'"],
      [
        'a module that exports no executors',
        ['--db', 'sqlite::memory:', 'worker', '--executors', join(WORKER_FIXTURES, 'no-executors.mjs')],
        2,
        'exports no `executors`',
      ],
      [
        'an unknown database URL',
        ['--db', 'redis://127.0.0.1/0', 'worker', '--executors', executors],
        2,
        'unsupported database URL',
      ],
      [
        'an unreachable database',
        ['--db', 'postgres://app:s3cret@127.0.0.1:1/none', 'worker', '--executors', executors],
        1,
        'cannot reach the database at postgres://app:***@127.0.0.1:1/none',
      ],
      [
        'a database without the command table',
        ['--db', 'sqlite::memory:', 'worker', '--executors', executors],
        1,
        'does not exist in this database',
      ],
    ]),
  )('%s', (_label, args, status, message) => {
    const r = run(args);
    expect(r.status).toBe(status);
    expect(r.stderr).toContain(message);
    // One line of the CLI's own: no stack trace, no driver text, no password.
    expect(r.stderr).not.toMatch(/\n\s+at |s3cret/);
    expect(r.stdout).toBe('');
  });
});

/** The cases with their exit status in their names (a format's `%i` would take the arguments' array). */
function withStatusInName(
  cases: readonly [string, string[], number, string][],
): [string, string[], number, string][] {
  return cases.map(([label, args, status, message]) => [`${label} → exit ${status}`, args, status, message]);
}
