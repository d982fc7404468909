import { execFileSync } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import type { Pool as MysqlPool, RowDataPacket } from 'mysql2/promise';
import type { Pool as PgPool } from 'pg';

/**
 * The CPU a database server on this machine has used, read from /proc: the database's share of a
 * run's cost beside the consumers' own (`process.cpuUsage`).
 */
export interface ServerCpu {
  /** User + system CPU of the server's processes so far, µs. */
  read(): Promise<number>;
}

/** A meter, or why there is none (printed as a note; the column shows "—"). */
export type ServerCpuProbe = { readonly meter: ServerCpu } | { readonly unavailable: string };

/** The fields of /proc/<pid>/stat the meter reads; times in clock ticks. */
export interface ProcStat {
  readonly pid: number;
  readonly comm: string;
  readonly ppid: number;
  readonly utime: number;
  readonly stime: number;
  /** CPU of the children this process has waited for (for the postmaster: its exited backends). */
  readonly cutime: number;
  readonly cstime: number;
  /** Ticks after boot the process started. */
  readonly starttime: number;
}

/**
 * Parses one /proc/<pid>/stat line (proc(5)). The command name sits in parentheses and may hold
 * spaces or parentheses itself, so the fields are counted from its last ')'.
 */
export function parseProcStat(line: string): ProcStat {
  const open = line.indexOf('(');
  const close = line.lastIndexOf(')');
  if (open < 0 || close < open) throw new Error(`not a /proc/<pid>/stat line: ${line.slice(0, 80)}`);
  // Field 3 (state) is rest[0]: field n is rest[n - 3].
  const rest = line
    .slice(close + 2)
    .trim()
    .split(' ');
  const field = (n: number): number => {
    const value = Number(rest[n - 3]);
    if (!Number.isFinite(value)) throw new Error(`/proc/<pid>/stat field ${n} is not a number`);
    return value;
  };
  return {
    pid: Number(line.slice(0, open).trim()),
    comm: line.slice(open + 1, close),
    ppid: field(4),
    utime: field(14),
    stime: field(15),
    cutime: field(16),
    cstime: field(17),
    starttime: field(22),
  };
}

/**
 * CPU ticks of a process tree one level deep: the parent's own and its waited-for children's
 * (exited backends), plus each live child's own. A backend that exits mid-run moves its time from
 * the live sum into the parent's children's time, so the total only grows.
 */
export function treeTicks(parent: ProcStat, children: readonly ProcStat[]): number {
  let ticks = parent.utime + parent.stime + parent.cutime + parent.cstime;
  for (const c of children) if (c.ppid === parent.pid) ticks += c.utime + c.stime;
  return ticks;
}

let ticksPerSecond: number | undefined;

/** `getconf CLK_TCK`: the unit of the times in /proc/<pid>/stat (100 on Linux unless built otherwise). */
function clockTicksPerSecond(): number {
  if (ticksPerSecond === undefined) {
    const answer = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    ticksPerSecond = Number.isInteger(answer) && answer > 0 ? answer : 100;
  }
  return ticksPerSecond;
}

async function readStat(pid: number): Promise<ProcStat> {
  return parseProcStat(await readFile(`/proc/${pid}/stat`, 'utf8'));
}

/** Every process's stat; processes that exit while being listed are skipped. */
async function allStats(): Promise<ProcStat[]> {
  const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name)).map(Number);
  const stats = await Promise.all(pids.map((pid) => readStat(pid).catch(() => null)));
  return stats.filter((s): s is ProcStat => s !== null);
}

/** When the process started, ms since the epoch (boot time from /proc/stat plus its start ticks). */
async function startedAtMs(stat: ProcStat): Promise<number> {
  const btime = /^btime (\d+)$/m.exec(await readFile('/proc/stat', 'utf8'));
  if (!btime) throw new Error('/proc/stat has no btime line');
  return Number(btime[1]) * 1000 + (stat.starttime / clockTicksPerSecond()) * 1000;
}

/**
 * The process is the server that says it started at `serverStartMs`: a pid read over the wire is
 * only meaningful here when the server shares this machine's process namespace.
 */
async function sameProcess(stat: ProcStat, serverStartMs: number): Promise<boolean> {
  // Start times in /proc are in clock ticks and btime in whole seconds.
  return Math.abs((await startedAtMs(stat)) - serverStartMs) < 2_000;
}

const reason = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * PostgreSQL's CPU: the postmaster and every process it forked (backends, walwriter, checkpointer,
 * autovacuum, parallel workers), including backends that exited during the run. The postmaster is
 * the parent of this connection's backend, confirmed by its start time against
 * `pg_postmaster_start_time()`.
 */
export async function postgresServerCpu(pool: PgPool): Promise<ServerCpuProbe> {
  try {
    const { rows } = await pool.query<{ pid: number; started: Date }>(
      'SELECT pg_backend_pid() AS pid, pg_postmaster_start_time() AS started',
    );
    const row = rows[0];
    if (!row) return { unavailable: 'the server did not say its backend pid' };
    const backend = await readStat(row.pid).catch(() => null);
    const postmaster = backend && (await readStat(backend.ppid).catch(() => null));
    if (!postmaster || !(await sameProcess(postmaster, row.started.getTime())))
      return {
        unavailable: `the PostgreSQL server's processes are not visible in this machine's /proc (another host, container or PID namespace); backend pid ${row.pid}`,
      };
    const pid = postmaster.pid;
    const tick = 1e6 / clockTicksPerSecond();
    return {
      meter: {
        read: async () => treeTicks(await readStat(pid), await allStats()) * tick,
      },
    };
  } catch (err) {
    return { unavailable: `PostgreSQL's CPU could not be read from /proc: ${reason(err)}` };
  }
}

/**
 * MariaDB's (or MySQL's) CPU: the one server process, all its threads, from the pid in
 * `@@pid_file`, confirmed by its start time against the server's `Uptime`.
 */
export async function mysqlServerCpu(pool: MysqlPool): Promise<ServerCpuProbe> {
  try {
    const [rows] = await pool.query<RowDataPacket[]>(
      "SELECT @@pid_file AS pidFile, (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME') AS uptime",
    );
    const askedAt = Date.now();
    const pidFile = String(rows[0]?.['pidFile'] ?? '');
    const uptimeS = Number(rows[0]?.['uptime']);
    const pid = Number((await readFile(pidFile, 'utf8').catch(() => '')).trim());
    const server = Number.isInteger(pid) && pid > 0 ? await readStat(pid).catch(() => null) : null;
    // Uptime is in whole seconds: allow one more.
    if (!server || !(await sameProcess(server, askedAt - uptimeS * 1000 - 500)))
      return {
        unavailable: `the MySQL/MariaDB server's process is not visible here (pid file ${pidFile || 'unknown'} not readable, or its pid is not the server's: another host, container or PID namespace)`,
      };
    const tick = 1e6 / clockTicksPerSecond();
    return {
      meter: {
        read: async () => {
          const s = await readStat(pid);
          return (s.utime + s.stime) * tick;
        },
      },
    };
  } catch (err) {
    return { unavailable: `MySQL/MariaDB's CPU could not be read from /proc: ${reason(err)}` };
  }
}

/**
 * Starts a window on the server's CPU: the returned function gives the CPU used since, per
 * command (µs), or NaN without a meter or when /proc stopped answering.
 */
export async function serverCpuWindow(
  meter: ServerCpu | undefined,
): Promise<(commands: number) => Promise<number>> {
  if (!meter) return () => Promise.resolve(Number.NaN);
  const at = await meter.read().catch(() => Number.NaN);
  return async (commands) => {
    const now = await meter.read().catch(() => Number.NaN);
    return commands > 0 ? (now - at) / commands : Number.NaN;
  };
}

/**
 * Locates the server on first use and keeps the answer; `unavailable` hears once why there is no
 * meter (the bench notes it under the sections whose column stays "—").
 */
export function serverCpuOnce(
  probe: () => Promise<ServerCpuProbe>,
  unavailable: (why: string) => void,
): () => Promise<ServerCpu | undefined> {
  let located: Promise<ServerCpu | undefined> | undefined;
  return () =>
    (located ??= probe().then((p) => {
      if ('meter' in p) return p.meter;
      unavailable(p.unavailable);
      return undefined;
    }));
}
