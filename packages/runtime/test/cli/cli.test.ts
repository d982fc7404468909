import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli } from './run.js';

describe('asynccmd CLI: usage and connection errors', () => {
  const dir = mkdtempSync(join(tmpdir(), 'asynccmd-cli-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('prints help and exits 0', async () => {
    const r = await cli(['--help']);
    expect(r.code).toBe(0);
    for (const command of [
      'migrate',
      'stats',
      'list',
      'show',
      'retry',
      'requeue',
      'kill',
      'cancel',
      'purge',
    ]) {
      expect(r.out).toContain(command);
    }
  });

  it('exits 2 on an unknown command or option', async () => {
    const unknown = await cli(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain("unknown command 'frobnicate'");
    expect((await cli(['list', '--colour', 'red'])).code).toBe(2);
  });

  it('exits 2 without a database, and reads ASYNCCMD_DB', async () => {
    const none = await cli(['stats']);
    expect(none).toMatchObject({ code: 2, err: 'asynccmd: no database: pass --db URL or set ASYNCCMD_DB\n' });
    const file = join(dir, 'env.db');
    const migrated = await cli(['migrate'], { ASYNCCMD_DB: `sqlite:${file}` });
    expect(migrated.code).toBe(0);
    const stats = await cli(['stats', '--json'], { ASYNCCMD_DB: `sqlite:${file}` });
    expect(stats.code).toBe(0);
    expect(JSON.parse(stats.out).total).toBe(0);
  });

  it('exits 2 on an unsupported URL, a missing SQLite file or a misplaced --schema', async () => {
    const scheme = await cli(['--db', 'oracle://scott:tiger@db/orcl', 'stats']);
    expect(scheme.code).toBe(2);
    expect(scheme.err).toContain('unsupported database URL "oracle://scott:***@db/orcl"');
    const missing = await cli(['--db', `sqlite:${join(dir, 'nope.db')}`, 'stats']);
    expect(missing.code).toBe(2);
    expect(missing.err).toContain('no SQLite database at');
    expect((await cli(['--db', `sqlite:${join(dir, 'x.db')}`, '--schema', 's', 'migrate'])).code).toBe(2);
    expect((await cli(['--db', 'mysql://root@127.0.0.1:3306/test', '--schema', 's', 'stats'])).code).toBe(2);
  });

  it('exits 1 with a clear message when the database cannot be reached', async () => {
    const pg = await cli(['--db', 'postgres://postgres:secret@127.0.0.1:1/test', 'stats']);
    expect(pg.code).toBe(1);
    expect(pg.err).toMatch(
      /^asynccmd: cannot reach the database at postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/test: /,
    );
    expect(pg.err).not.toContain('secret');
    const my = await cli(['--db', 'mysql://root@127.0.0.1:1/test', 'stats']);
    expect(my.code).toBe(1);
    expect(my.err).toMatch(/^asynccmd: cannot reach the database at mysql:\/\/root@127\.0\.0\.1:1\/test: /);
    const dirGone = await cli(['--db', `sqlite:${join(dir, 'no-such-dir', 'a.db')}`, 'migrate']);
    expect(dirGone.code).toBe(1);
    expect(dirGone.err).toMatch(/^asynccmd: cannot reach the database at sqlite:.*directory does not exist/);
  });
});
