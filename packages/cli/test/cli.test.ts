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
      'pause',
      'resume',
      'paused',
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

  it('exits 2 on an unsupported URL or a misplaced --schema', async () => {
    const scheme = await cli(['--db', 'oracle://scott:tiger@db/orcl', 'stats']);
    expect(scheme.code).toBe(2);
    expect(scheme.err).toContain('unsupported database URL "oracle://scott:***@db/orcl"');
    expect((await cli(['--db', `sqlite:${join(dir, 'x.db')}`, '--schema', 's', 'migrate'])).code).toBe(2);
    expect((await cli(['--db', 'mysql://root@127.0.0.1:3306/test', '--schema', 's', 'stats'])).code).toBe(2);
  });

  it('exits 1 on a missing SQLite file (a database problem, not bad usage), saying to migrate', async () => {
    const file = join(dir, 'nope.db');
    for (const args of [['stats'], ['list'], ['show', '1']]) {
      expect(await cli(['--db', `sqlite:${file}`, ...args])).toEqual({
        code: 1,
        out: '',
        err: `asynccmd: no SQLite database at ${JSON.stringify(file)}: run "asynccmd migrate" to create it\n`,
      });
    }
  });

  it("exits 1 with a clear message of its own, never the driver's, when the database cannot be reached", async () => {
    const pg = await cli(['--db', 'postgres://postgres:secret@127.0.0.1:1/test', 'stats']);
    expect(pg).toEqual({
      code: 1,
      out: '',
      err:
        'asynccmd: cannot reach the database at postgres://postgres:***@127.0.0.1:1/test: ' +
        'the connection was refused (is the server running, on that host and port?)\n',
    });
    const my = await cli(['--db', 'mysql://root@127.0.0.1:1/test', 'stats']);
    expect(my.code).toBe(1);
    expect(my.err).toBe(
      'asynccmd: cannot reach the database at mysql://root@127.0.0.1:1/test: ' +
        'the connection was refused (is the server running, on that host and port?)\n',
    );
    const dirGone = await cli(['--db', `sqlite:${join(dir, 'no-such-dir', 'a.db')}`, 'migrate']);
    expect(dirGone).toEqual({
      code: 1,
      out: '',
      err: `asynccmd: the directory of the SQLite file ${JSON.stringify(join(dir, 'no-such-dir', 'a.db'))} does not exist\n`,
    });
  });

  it('masks a password wherever the URL carries it, the query string included', async () => {
    for (const [url, shown] of [
      [
        'postgres://postgres@127.0.0.1:1/test?password=hunter2&sslmode=disable',
        'postgres://postgres@127.0.0.1:1/test?password=***&sslmode=disable',
      ],
      ['mysql://root@127.0.0.1:1/test?password=hunter2', 'mysql://root@127.0.0.1:1/test?password=***'],
      [
        'postgres://u:hunter2@127.0.0.1:1/test?sslpassword=hunter2',
        'postgres://u:***@127.0.0.1:1/test?sslpassword=***',
      ],
      ['oracle://scott:hunter2@db:1/orcl?password=hunter2', 'oracle://scott:***@db:1/orcl?password=***'],
      // Not parseable as a URL (a space in the host): still masked.
      ['oracle://scott:hunter2@d b/orcl?password=hunter2', 'oracle://scott:***@d b/orcl?password=***'],
    ]) {
      const r = await cli(['--db', url!, 'stats']);
      expect(r.err, url).toContain(shown);
      expect(r.err, url).not.toContain('hunter2');
    }
  });
});
