import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { appendFileSync, chownSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CommandRecord } from '@asynccmd/core';
import pg from 'pg';
import type { LogLine } from './execution-log.js';
import { PG_BIN, TempPostgres, freePort, removeOnThrow, runOrThrow, serverUser } from './temp-servers.js';

/** A temporary PostgreSQL cluster that began as a streaming-replication copy of another. */
class TempStandby extends TempPostgres {
  /** `pg_basebackup -R` of `primary`: the copy starts as a hot standby streaming from it. */
  static async copyOf(primary: TempPostgres): Promise<TempStandby> {
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-faults-pg-standby-'));
    const as = serverUser('postgres');
    if (as.uid !== undefined && as.gid !== undefined) chownSync(dir, as.uid, as.gid);
    removeOnThrow(dir, () =>
      runOrThrow(
        `${PG_BIN}/pg_basebackup`,
        [
          ...['-D', join(dir, 'data'), '-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres'],
          ...['-R', '-X', 'stream', '-c', 'fast', '--no-sync'],
        ],
        as,
      ),
    );
    // A standby that lost its primary retries WAL every wal_retrieve_retry_interval (5 s by
    // default), and a promotion waits out the current pause: a failover manager shortens it.
    appendFileSync(join(dir, 'data', 'postgresql.auto.conf'), "wal_retrieve_retry_interval = '100ms'\n");
    return new TempStandby(dir, await freePort());
  }

  /**
   * `pg_ctl promote`: resolves once the standby has left recovery and takes writes. Not a
   * synchronous spawn: the proxy runs in this process and must not stall meanwhile.
   */
  async promote(): Promise<void> {
    const child = spawn(`${PG_BIN}/pg_ctl`, ['promote', '-D', join(this.dir, 'data'), '-w'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      ...serverUser('postgres'),
    });
    let output = '';
    const keep = (d: Buffer) => (output += d.toString());
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const [code] = (await once(child, 'exit')) as [number | null];
    if (code !== 0) throw new Error(`pg_ctl promote failed (${code}): ${output}`);
  }
}

/** Runs `sql` on the server at `port` (database postgres) and returns its rows. */
async function query<R extends pg.QueryResultRow>(port: number, sql: string): Promise<R[]> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query<R>(sql)).rows;
  } finally {
    await client.end();
  }
}

/**
 * A primary and its streaming-replication standby, each a temporary cluster on its own port.
 * `synchronous` makes the standby synchronous (`synchronous_standby_names = '*'`): a durable
 * commit on the primary returns only once the standby has flushed it.
 */
export class ReplicatedPostgres {
  private constructor(
    readonly primary: TempPostgres,
    readonly standby: TempStandby,
  ) {}

  static async start(options: { readonly synchronous: boolean }): Promise<ReplicatedPostgres> {
    const primary = await TempPostgres.create();
    try {
      // initdb writes this line already; it is what the standby's replication connection needs.
      const hba = join(primary.dir, 'data', 'pg_hba.conf');
      if (!/^host\s+replication\s+all\s+127\.0\.0\.1\/32\s+trust/m.test(readFileSync(hba, 'utf8'))) {
        appendFileSync(hba, '\nhost replication all 127.0.0.1/32 trust\n');
      }
      await primary.start();
      const standby = await TempStandby.copyOf(primary);
      const pair = new ReplicatedPostgres(primary, standby);
      try {
        await standby.start();
        if (options.synchronous) {
          await query(primary.port, `ALTER SYSTEM SET synchronous_standby_names = '*'`);
          await query(primary.port, 'SELECT pg_reload_conf()');
        }
        await pair.#streaming(options.synchronous ? 'sync' : 'async');
        return pair;
      } catch (error) {
        await standby.dispose();
        throw error;
      }
    } catch (error) {
      await primary.dispose();
      throw error;
    }
  }

  /** Resolves once the primary reports the standby streaming in `mode`. */
  async #streaming(mode: 'sync' | 'async'): Promise<void> {
    const until = Date.now() + 30_000;
    for (;;) {
      const rows = await query<{ state: string; sync_state: string }>(
        this.primary.port,
        'SELECT state, sync_state FROM pg_stat_replication',
      );
      if (rows.some((r) => r.state === 'streaming' && r.sync_state === mode)) return;
      if (Date.now() > until)
        throw new Error(`the standby is not streaming (${mode}): ${JSON.stringify(rows)}`);
      await sleep(50);
    }
  }

  /** Resolves once the standby has replayed everything the primary has written so far. */
  async caughtUp(): Promise<void> {
    const [primary] = await query<{ lsn: string }>(this.primary.port, 'SELECT pg_current_wal_lsn() AS lsn');
    const until = Date.now() + 30_000;
    for (;;) {
      const [standby] = await query<{ behind: boolean }>(
        this.standby.port,
        `SELECT pg_last_wal_replay_lsn() < '${primary!.lsn}'::pg_lsn AS behind`,
      );
      if (standby?.behind === false) return;
      if (Date.now() > until) throw new Error('the standby did not catch up');
      await sleep(20);
    }
  }

  /**
   * SIGKILL of the primary (every process of it), and promotion of the standby at once, as a
   * failover manager would on losing the primary. Resolves once the standby takes writes; then
   * `crashed` resolves once the old primary's processes are gone.
   */
  async failover(): Promise<{ promotedMs: number; crashed: Promise<void> }> {
    const started = Date.now();
    // crash() sends its signals before its first await.
    const crashed = this.primary.crash();
    await this.standby.promote();
    return { promotedMs: Date.now() - started, crashed };
  }

  async dispose(): Promise<void> {
    try {
      await this.standby.dispose();
    } finally {
      await this.primary.dispose();
    }
  }
}

/** What a failover cost, from the execution log and the new primary's rows as promoted. */
export interface FailoverCost {
  /** Committed on the old primary, but the new primary does not hold the command at all. */
  readonly lostByReplication: string[];
  /**
   * Commands whose last acknowledged write on the old primary the new primary does not reflect:
   * a success acknowledged but not SUCCESS there, or a claim acknowledged (the executor started)
   * but the command neither SUCCESS nor RUNNING under that process there.
   */
  readonly unreplicated: Set<string>;
  /** Commands that started before the switch and started again after it. */
  readonly reruns: string[];
}

/**
 * Compares what the workers were told before the proxy was switched (`switchedAt`: everything
 * logged before it was answered by the old primary) with the new primary's rows at promotion,
 * before any worker reached it.
 */
export function failoverCost(
  committed: readonly string[],
  lines: readonly LogLine[],
  promoted: readonly CommandRecord[],
  switchedAt: number,
): FailoverCost {
  const held = new Map(promoted.map((c) => [String(c.id), c]));
  const lostByReplication = committed.filter((id) => !held.has(id));
  /** Per command, the last thing the old primary acknowledged: a claim by a pid, or the success. */
  const lastAcknowledged = new Map<string, { event: 'start' | 'ack'; pid: number }>();
  const startedBefore = new Set<string>();
  const startedAfter = new Set<string>();
  for (const l of lines) {
    if (l.event === 'start') (l.at < switchedAt ? startedBefore : startedAfter).add(l.id);
    if (l.at >= switchedAt || (l.event !== 'start' && l.event !== 'ack')) continue;
    lastAcknowledged.set(l.id, { event: l.event, pid: l.pid });
  }
  const unreplicated = new Set<string>();
  for (const [id, last] of lastAcknowledged) {
    const row = held.get(id);
    if (row === undefined) continue;
    const reflected =
      row.status === 'SUCCESS' ||
      (last.event === 'start' && row.status === 'RUNNING' && (row.claimedBy ?? '').includes(`/${last.pid}/`));
    if (!reflected) unreplicated.add(id);
  }
  const reruns = [...startedAfter].filter((id) => startedBefore.has(id));
  return { lostByReplication, unreplicated, reruns };
}
