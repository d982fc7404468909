import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { createConnection } from 'mysql2/promise';
import pg from 'pg';

const GUARD = fileURLToPath(new URL('./server-guard.mjs', import.meta.url));
export const PG_BIN = process.env.ASYNCCMD_PG_BIN ?? '/usr/lib/postgresql/15/bin';

/**
 * A database server of the suite's own, on its own port and data directory, that it may restart
 * and crash: never the shared servers other tests use. Killed at process exit at the latest.
 */
export interface TempServer {
  readonly kind: 'postgres' | 'mysql';
  readonly port: number;
  /** Starts it (again, after a stop or crash) and resolves once it accepts connections. */
  start(): Promise<void>;
  /** A clean shutdown (PostgreSQL fast mode, mariadbd on SIGTERM). */
  stop(): Promise<void>;
  /** SIGKILL of the server and every process it started, as an OOM kill or a power cut of the process would. */
  crash(): Promise<void>;
  /** Stops it and removes its data directory. */
  dispose(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) killGroup(child, 'SIGKILL');
});

export function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // already gone
  }
}

/** How much of a server's output a guarded process keeps, for a failure message. */
const OUTPUT_TAIL = 4_000;

/** A server under the guard, and the tail of what it printed. */
export interface GuardedProcess {
  readonly child: ChildProcess;
  /** The last few thousand characters of its stdout and stderr. */
  output(): string;
}

/**
 * Starts `command` under the guard, in its own process group (so a crash takes every process of
 * the server at once), as `as` when given; the guard takes it down should this process end without
 * stopping it, and it is killed at this process's exit at the latest. Its output is always read:
 * a pipe nobody reads fills up and blocks the server at its next log line (a PgBouncer logging
 * each login stalled every client after a few hundred).
 */
export function spawnGuarded(
  command: string,
  args: readonly string[],
  as: { uid?: number; gid?: number },
): GuardedProcess {
  const child = spawn(process.execPath, [GUARD, command, ...args], {
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: {
      ...process.env,
      ...(as.uid === undefined
        ? {}
        : { ASYNCCMD_GUARD_UID: String(as.uid), ASYNCCMD_GUARD_GID: String(as.gid) }),
    },
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  let tail = '';
  const keep = (d: Buffer) => (tail = (tail + d.toString()).slice(-OUTPUT_TAIL));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { child, output: () => tail };
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no free port');
  return address.port;
}

/** PostgreSQL refuses to run as root: its programs run as the `postgres` user then. */
export function serverUser(kind: 'postgres' | 'mysql'): { uid?: number; gid?: number } {
  if (kind !== 'postgres' || userInfo().uid !== 0) return {};
  const id = (flag: string) =>
    Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** Runs a command to its end; throws with its output if it fails. */
export function runOrThrow(
  command: string,
  args: readonly string[],
  as: { uid?: number; gid?: number } = {},
): void {
  const result = spawnSync(command, args, { encoding: 'utf8', ...as });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} failed (${result.status}): ${result.stderr}${result.stdout}`,
    );
  }
}

export function removeOnThrow(dir: string, step: () => void): void {
  try {
    step();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

abstract class ProcessServer implements TempServer {
  abstract readonly kind: 'postgres' | 'mysql';
  #child: ChildProcess | null = null;
  #exited: Promise<void> = Promise.resolve();
  #output: () => string = () => '';

  protected constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  protected abstract command(): [string, string[]];
  protected abstract ping(): Promise<void>;

  async start(): Promise<void> {
    const current = this.#child;
    if (current && current.exitCode === null && current.signalCode === null) return;
    const [command, args] = this.command();
    const guarded = spawnGuarded(command, args, serverUser(this.kind));
    const child = guarded.child;
    this.#child = child;
    this.#output = guarded.output;
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()));
    const until = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${this.kind} server exited at start: ${this.#output()}`);
      try {
        await this.ping();
        return;
      } catch (error) {
        if (Date.now() > until)
          throw new Error(`${this.kind} server did not answer: ${String(error)} ${this.#output()}`);
        await sleep(50);
      }
    }
  }

  async stop(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    this.shutdownSignal(child);
    const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 30_000);
    await this.#exited;
    clearTimeout(timer);
  }

  protected shutdownSignal(child: ChildProcess): void {
    killGroup(child, 'SIGTERM');
  }

  /** The server's processes beyond the guard's own group (PostgreSQL's children each lead a session). */
  protected serverPids(): number[] {
    return [];
  }

  async crash(): Promise<void> {
    const child = this.#child;
    if (!child) return;
    const pids = this.serverPids();
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    killGroup(child, 'SIGKILL');
    await this.#exited;
    // The next start must not find a process of this one still holding the data directory.
    const until = Date.now() + 10_000;
    while (pids.some((pid) => existsSync(`/proc/${pid}`)) && Date.now() < until) await sleep(20);
  }

  async dispose(): Promise<void> {
    try {
      await this.stop();
    } finally {
      if (this.#child) killGroup(this.#child, 'SIGKILL');
      await this.#exited;
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

export class TempPostgres extends ProcessServer {
  readonly kind = 'postgres' as const;

  static async create(): Promise<TempPostgres> {
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-faults-pg-'));
    const as = serverUser('postgres');
    if (as.uid !== undefined && as.gid !== undefined) chownSync(dir, as.uid, as.gid);
    const data = join(dir, 'data');
    removeOnThrow(dir, () =>
      runOrThrow(`${PG_BIN}/initdb`, ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync'], as),
    );
    return new TempPostgres(dir, await freePort());
  }

  protected command(): [string, string[]] {
    return [
      `${PG_BIN}/postgres`,
      [
        '-D',
        join(this.dir, 'data'),
        '-p',
        String(this.port),
        '-k',
        this.dir,
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'max_connections=60',
        '-c',
        'shared_buffers=32MB',
      ],
    ];
  }

  protected override shutdownSignal(): void {
    // Fast shutdown: the postmaster alone gets SIGINT; it ends its backends and checkpoints.
    runOrThrow(
      `${PG_BIN}/pg_ctl`,
      ['stop', '-D', join(this.dir, 'data'), '-m', 'fast', '-w'],
      serverUser('postgres'),
    );
  }

  /** The postmaster (first line of postmaster.pid) and every process it started. */
  protected override serverPids(): number[] {
    let postmaster: number;
    try {
      postmaster = Number(readFileSync(join(this.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
    } catch {
      return [];
    }
    const children = readdirSync('/proc')
      .filter((name) => /^\d+$/.test(name))
      .filter((name) => {
        try {
          // The fourth field of /proc/<pid>/stat is the parent's pid (after "(comm)", which may hold spaces).
          const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
          return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
        } catch {
          return false;
        }
      })
      .map(Number);
    return [postmaster, ...children];
  }

  protected async ping(): Promise<void> {
    const client = new pg.Client({
      host: '127.0.0.1',
      port: this.port,
      user: 'postgres',
      database: 'postgres',
    });
    client.on('error', () => undefined);
    await client.connect();
    await client.end();
  }
}

class TempMariadb extends ProcessServer {
  readonly kind = 'mysql' as const;

  static async create(): Promise<TempMariadb> {
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-faults-mariadb-'));
    removeOnThrow(dir, () =>
      runOrThrow('mariadb-install-db', [
        '--no-defaults',
        `--datadir=${join(dir, 'data')}`,
        `--user=${userInfo().username}`,
        '--auth-root-authentication-method=normal',
        '--skip-test-db',
      ]),
    );
    return new TempMariadb(dir, await freePort());
  }

  protected command(): [string, string[]] {
    return [
      'mariadbd',
      [
        '--no-defaults',
        `--datadir=${join(this.dir, 'data')}`,
        `--port=${this.port}`,
        '--bind-address=127.0.0.1',
        `--socket=${join(this.dir, 'mariadb.sock')}`,
        `--pid-file=${join(this.dir, 'mariadb.pid')}`,
        `--user=${userInfo().username}`,
        '--innodb-buffer-pool-size=64M',
        '--skip-log-bin',
      ],
    ];
  }

  protected async ping(): Promise<void> {
    const conn = await createConnection({ host: '127.0.0.1', port: this.port, user: 'root' });
    await conn.end();
  }
}

export function createTempServer(kind: 'postgres' | 'mysql'): Promise<TempServer> {
  return kind === 'postgres' ? TempPostgres.create() : TempMariadb.create();
}

// For servers of other shapes built on the same guard and lifecycle (galera.ts).
export { ProcessServer };
