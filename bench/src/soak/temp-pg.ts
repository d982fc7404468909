import { spawnSync } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

const PG_BIN = process.env['BENCH_PG_BIN'] ?? '/usr/lib/postgresql/15/bin';

/**
 * A PostgreSQL server of the soak's own (initdb on a free port, as the fault suite starts one): its
 * configuration is initdb's defaults — autovacuum on — unless told otherwise, never the shared test
 * server (which runs with autovacuum off). Stopped at process exit at the latest.
 */
export interface TempPostgres {
  readonly url: string;
  readonly settings: string;
  stop(): void;
}

const started = new Set<TempPostgres>();
process.on('exit', () => {
  for (const server of started) server.stop();
});

/** PostgreSQL refuses to run as root: its programs run as the `postgres` user then. */
function serverUser(): { uid?: number; gid?: number } {
  if (userInfo().uid !== 0) return {};
  const id = (flag: string): number =>
    Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  return { uid: id('-u'), gid: id('-g') };
}

function run(command: string, args: readonly string[], as: { uid?: number; gid?: number }): void {
  const result = spawnSync(command, args, { encoding: 'utf8', ...as });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} failed (${result.status}): ${result.stderr}${result.stdout}`,
    );
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no free port');
  return address.port;
}

/**
 * Starts a fresh server; `autovacuum: false` turns autovacuum off, everything else stays initdb's
 * default (shared_buffers 128MB, max_connections 100, autovacuum_naptime 1 min, …).
 */
export async function startTempPostgres(options: {
  autovacuum: boolean;
  /** More server settings, `name=value` each (e.g. shared_preload_libraries). */
  settings?: readonly string[];
}): Promise<TempPostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'asynccmd-soak-pg-'));
  const as = serverUser();
  if (as.uid !== undefined && as.gid !== undefined) chownSync(dir, as.uid, as.gid);
  const data = join(dir, 'data');
  const port = await freePort();
  const extra =
    (options.autovacuum ? '' : ' -c autovacuum=off') +
    (options.settings ?? []).map((setting) => ` -c ${setting}`).join('');
  try {
    run(`${PG_BIN}/initdb`, ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync'], as);
    run(
      `${PG_BIN}/pg_ctl`,
      [
        'start',
        '-D',
        data,
        '-w',
        '-l',
        join(dir, 'server.log'),
        '-o',
        `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1${extra}`,
      ],
      as,
    );
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  let stopped = false;
  const server: TempPostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    settings: `a server of the bench's own (initdb defaults${options.autovacuum ? ', autovacuum on' : ', autovacuum off'}), port ${port}`,
    stop: () => {
      if (stopped) return;
      stopped = true;
      started.delete(server);
      spawnSync(`${PG_BIN}/pg_ctl`, ['stop', '-D', data, '-m', 'immediate', '-w'], { ...as });
      rmSync(dir, { recursive: true, force: true });
    },
  };
  started.add(server);
  return server;
}
