import type { ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { freePort, killGroup, serverUser, spawnGuarded } from '../faults/temp-servers.js';

const PGBOUNCER = process.env.ASYNCCMD_PGBOUNCER ?? '/usr/sbin/pgbouncer';
/** The PostgreSQL server PgBouncer forwards to: the shared one. */
const UPSTREAM = new URL(process.env.ASYNCCMD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test');

export interface PgBouncerOptions {
  /** Default 'transaction'. */
  readonly poolMode?: 'transaction' | 'session';
  /** Server connections per database and user; few, so that clients share them. Default 4. */
  readonly poolSize?: number;
  /** More lines of the `[pgbouncer]` section, as a user would add them. */
  readonly settings?: Readonly<Record<string, string>>;
}

/**
 * A PgBouncer of a test's own: its own port, config file, auth file and log in a temporary
 * directory, in front of the shared PostgreSQL server (whose configuration it leaves alone). It
 * runs under the fault suite's guard, so it goes down with the test process at the latest.
 */
export class PgBouncer {
  readonly #child: ChildProcess;
  readonly #exited: Promise<void>;

  private constructor(
    readonly dir: string,
    readonly port: number,
    child: ChildProcess,
  ) {
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()));
  }

  static async start(options: PgBouncerOptions = {}): Promise<PgBouncer> {
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-pgbouncer-'));
    // PgBouncer refuses to run as root: it runs as the `postgres` user then, owning its directory.
    const as = serverUser('postgres');
    if (as.uid !== undefined && as.gid !== undefined) chownSync(dir, as.uid, as.gid);
    const port = await freePort();
    const database = UPSTREAM.pathname.slice(1) || 'postgres';
    const user = decodeURIComponent(UPSTREAM.username || 'postgres');
    const settings: Record<string, string> = {
      listen_addr: '127.0.0.1',
      listen_port: String(port),
      unix_socket_dir: '',
      auth_type: 'trust',
      auth_file: join(dir, 'userlist.txt'),
      pool_mode: options.poolMode ?? 'transaction',
      default_pool_size: String(options.poolSize ?? 4),
      max_client_conn: '500',
      logfile: join(dir, 'pgbouncer.log'),
      pidfile: join(dir, 'pgbouncer.pid'),
      ...options.settings,
    };
    const upstream = `host=${UPSTREAM.hostname} port=${UPSTREAM.port || 5432} dbname=${database}`;
    writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n`);
    writeFileSync(
      join(dir, 'pgbouncer.ini'),
      [
        '[databases]',
        `${database} = ${upstream}`,
        '[pgbouncer]',
        ...Object.entries(settings).map(([k, v]) => `${k} = ${v}`),
      ].join('\n') + '\n',
    );
    for (const file of ['userlist.txt', 'pgbouncer.ini'])
      if (as.uid !== undefined && as.gid !== undefined) chownSync(join(dir, file), as.uid, as.gid);
    const { child } = spawnGuarded(PGBOUNCER, [join(dir, 'pgbouncer.ini')], as);
    const bouncer = new PgBouncer(dir, port, child);
    try {
      await bouncer.#ready();
    } catch (error) {
      await bouncer.stop();
      throw error;
    }
    return bouncer;
  }

  /** A postgres:// URI of the shared test database through this PgBouncer. */
  get url(): string {
    const url = new URL(UPSTREAM.href);
    url.hostname = '127.0.0.1';
    url.port = String(this.port);
    return url.href;
  }

  /** What PgBouncer logged, for a failure message. */
  log(): string {
    try {
      return readFileSync(join(this.dir, 'pgbouncer.log'), 'utf8');
    } catch {
      return '';
    }
  }

  /** Stops it (SIGTERM: PgBouncer's immediate shutdown) and removes its directory. */
  async stop(): Promise<void> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) {
      killGroup(this.#child, 'SIGTERM');
      const timer = setTimeout(() => killGroup(this.#child, 'SIGKILL'), 10_000);
      await this.#exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  async #ready(): Promise<void> {
    const until = Date.now() + 30_000;
    for (;;) {
      if (this.#child.exitCode !== null) throw new Error(`pgbouncer exited at start: ${this.log()}`);
      const client = new pg.Client({ connectionString: this.url });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.query('SELECT 1');
        await client.end();
        return;
      } catch (error) {
        await client.end().catch(() => undefined);
        if (Date.now() > until) throw new Error(`pgbouncer did not answer: ${String(error)} ${this.log()}`);
        await sleep(50);
      }
    }
  }
}
