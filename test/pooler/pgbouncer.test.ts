import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { createPostgresStore, type PostgresCommandStore } from '@asynccmd/adapter-postgres';
import type { CommandRecord, NewCommand } from '@asynccmd/core';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgAdmin } from '../faults/databases.js';
import { AckCounter, check, readExecutionLog, type LogLine } from '../faults/execution-log.js';
import {
  startWorker,
  stopWorkers,
  type WorkerProcess,
  type WorkerSpec,
  type WorkerTiming,
} from '../faults/workers.js';
import { PgBouncer } from './pgbouncer.js';

/**
 * The PostgreSQL store through a PgBouncer of this file's own in transaction pooling mode, with
 * real worker processes (test/faults/worker.mjs) logging every execution outside the queue's
 * tables. PgBouncer gets only a few server connections, so the clients' consecutive transactions
 * keep landing on different ones: a named prepared statement or a session setting would not
 * survive that. Nothing here relies on `ignore_startup_parameters`.
 */
const FULL = process.env.ASYNCCMD_FAULTS === 'full';
const SIZES = FULL
  ? { drain: { commands: 10_000, processes: 6 }, latency: { commands: 1_000 } }
  : { drain: { commands: 3_000, processes: 4 }, latency: { commands: 300 } };
const DIRECT_URL = process.env.ASYNCCMD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const TYPE = 'pooler.work';
const SCHEMA = `pgbouncer_${process.pid}_${Math.floor(Math.random() * 1e6)}`;

let bouncer: PgBouncer;
let store: PostgresCommandStore;

/** The store options a process uses to reach the database through the PgBouncer. */
const throughBouncer = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  connectionString: bouncer.url,
  poolConfig: { max: 4 },
  schema: SCHEMA,
  pooler: 'transaction',
  ...extra,
});

beforeAll(async () => {
  bouncer = await PgBouncer.start({ poolMode: 'transaction', poolSize: 4 });
  store = createPostgresStore(throughBouncer());
  // Through the pooler too: its advisory lock and DDL are all in one transaction.
  await store.migrate();
}, 60_000);

afterAll(async () => {
  await store?.close();
  await bouncer?.stop();
  await pgAdmin(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
});

const command = (ms: number): NewCommand => ({
  type: TYPE,
  payloadJson: JSON.stringify({ ms }),
  maxRetry: 5,
});

/** The tuned worker options of the rows printed beside the ones at their defaults. */
const TUNED: WorkerTiming & { concurrency: number } = {
  concurrency: 4,
  leaseMs: 5_000,
  heartbeatIntervalMs: 100,
  reclaimIntervalMs: 300,
  pollIntervalMs: 50,
};

/**
 * Worker processes draining TYPE through the PgBouncer with `settings` (`{}`: every runtime option
 * at its default, the default pool); `storeOptions` add to (or override) their store options.
 */
async function startWorkers(
  count: number,
  log: string,
  settings: WorkerTiming & { concurrency?: number },
  storeOptions: Record<string, unknown> = {},
): Promise<WorkerProcess[]> {
  const spec: WorkerSpec = {
    store: {
      module: '@asynccmd/adapter-postgres',
      factory: 'createPostgresStore',
      options: throughBouncer(storeOptions),
    },
    type: TYPE,
    log,
    mode: 'ASYNC_POOL',
    ...settings,
  };
  return Promise.all(Array.from({ length: count }, () => startWorker(spec)));
}

const describeWorkers = (settings: WorkerTiming & { concurrency?: number }): string =>
  settings.concurrency === undefined
    ? 'the default pool, every runtime option at its default'
    : `${settings.concurrency} slots, tuned: lease ${settings.leaseMs} ms, heartbeat ${settings.heartbeatIntervalMs} ms, poll ${settings.pollIntervalMs} ms`;

async function rowsOf(ids: readonly string[]): Promise<CommandRecord[]> {
  const rows: CommandRecord[] = [];
  for (let i = 0; i < ids.length; i += 1_000) rows.push(...(await store.getMany(ids.slice(i, i + 1_000))));
  return rows;
}

async function until(done: () => boolean, deadlineMs: number): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!done() && Date.now() < end) await sleep(100);
}

/** Successes per second from the first start to the last success in the log. */
function drainRate(lines: readonly LogLine[]): number {
  const starts = lines.filter((l) => l.event === 'start').map((l) => l.at);
  const acked = lines.filter((l) => l.event === 'ack').map((l) => l.at);
  return Math.round(acked.length / ((Math.max(...acked) - Math.min(...starts)) / 1000));
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

describe('PostgreSQL through PgBouncer (pool_mode = transaction)', () => {
  it('refuses the store with its direct-connection settings, and takes it with pooler: transaction', async () => {
    const direct = createPostgresStore({ connectionString: bouncer.url, schema: SCHEMA });
    try {
      // What the pooler option exists for: PgBouncer refuses the start-up `options` of a direct connection.
      await expect(direct.ping()).rejects.toThrow(/unsupported startup parameter: options/);
    } finally {
      await direct.close();
    }
    await expect(store.ping()).resolves.toBeUndefined();
    // Without a listenConnection there is nothing to LISTEN on: no wake-ups, no revocations.
    expect(store.capabilities).toMatchObject({ wakeups: false, revocations: false });
    expect(store.revocations).toBeUndefined();
    const unsubscribe = await store.wakeups.subscribe(() => undefined);
    expect(store.wakeups.listening).toBe(false);
    await unsubscribe();
  });

  it("what the option avoids: through a PgBouncer told to ignore `options`, the direct path's prepared statements collide", async () => {
    // One server connection shared by two stores, as processes share a pool's connections.
    const ignoring = await PgBouncer.start({
      poolSize: 1,
      settings: { ignore_startup_parameters: 'options' },
    });
    const open = (extra: Record<string, unknown>) =>
      createPostgresStore({ connectionString: ignoring.url, schema: SCHEMA, ...extra });
    const claim = (on: PostgresCommandStore) =>
      on.claimDue({ now: new Date(), types: ['pooler.none'], limit: 1, token: 't', leaseMs: 1_000 });
    const [a, b, c, d] = [
      open({}),
      open({}),
      open({ pooler: 'transaction' }),
      open({ pooler: 'transaction' }),
    ];
    try {
      await claim(a);
      // The statement a prepared is on the one server connection, unknown to b's client.
      await expect(claim(b)).rejects.toThrow(/prepared statement .* already exists/);
      for (let i = 0; i < 3; i++) await Promise.all([claim(c), claim(d)]);
    } finally {
      await Promise.all([a, b, c, d].map((s) => s.close()));
      await ignoring.stop();
    }
  });

  it('the asynccmd CLI through the pooler: refused as a direct connection, working with --pooler transaction', () => {
    const main = join(dirname(fileURLToPath(import.meta.url)), '../../packages/cli/dist/main.js');
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, [main, '--db', bouncer.url, '--schema', SCHEMA, ...args], {
        encoding: 'utf8',
        env: { ...process.env, ASYNCCMD_PG_POOLER: '' },
      });
    const direct = cli('stats', '--json');
    expect(direct.status).toBe(1);
    expect(direct.stderr).toMatch(
      /cannot reach the database .*: the server refused the connection's start-up settings, as a transaction pooler \(PgBouncer\) does: pass --pooler transaction\n$/,
    );
    for (const args of [
      ['--pooler', 'transaction', 'migrate'],
      ['--pooler', 'transaction', 'stats', '--json'],
      ['--pooler', 'transaction', 'list', '--json'],
    ]) {
      const r = cli(...args);
      expect({ args, status: r.status, stderr: r.stderr }).toEqual({ args, status: 0, stderr: '' });
    }
    const viaEnvironment = spawnSync(
      process.execPath,
      [main, '--db', bouncer.url, '--schema', SCHEMA, 'stats', '--json'],
      {
        encoding: 'utf8',
        env: { ...process.env, ASYNCCMD_PG_POOLER: 'transaction' },
      },
    );
    expect(viaEnvironment.status).toBe(0);
    expect(JSON.parse(viaEnvironment.stdout)).toHaveProperty('byStatus');
  });

  for (const settings of [{}, TUNED])
    it(`${SIZES.drain.processes} worker processes (${describeWorkers(settings)}) drain over ${SIZES.drain.commands} commands submitted every way: 0 lost, 0 twice`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'asynccmd-pgbouncer-drain-'));
      const log = join(dir, 'executions.log');
      let workers: WorkerProcess[] = [];
      const committed: string[] = [];
      const callersPool = new pg.Pool({ connectionString: bouncer.url, max: 4 });
      try {
        const quarter = Math.floor(SIZES.drain.commands / 4);
        // Batched: one multi-row insert per transaction.
        for (let i = 0; i < quarter; i += 100) {
          const batch = Array.from({ length: Math.min(100, quarter - i) }, () => command(2));
          committed.push(...(await store.transaction((tx) => store.insert(tx, batch))));
        }
        // Pipelined: single-row inserts held back to the COMMIT (ids taken ahead), the NOTIFY riding it.
        for (let i = 0; i < quarter; i += 5) {
          committed.push(
            ...(await store.transaction(async (tx) => {
              store.capabilities.commitRiding?.notify(tx);
              const ids: string[] = [];
              for (let j = 0; j < 5 && i + j < quarter; j++)
                ids.push(...(await store.insert(tx, [command(2)])));
              return ids;
            })),
          );
        }
        // In the caller's own transactions on a pool of its own through the same PgBouncer, concurrently.
        const rest = SIZES.drain.commands - 2 * quarter;
        await Promise.all(
          Array.from({ length: 4 }, async (_, lane) => {
            for (let i = lane; i < rest; i += 4) {
              const client = await callersPool.connect();
              try {
                await client.query('BEGIN');
                const [id] = await store.insert(client, [command(2)]);
                if (i % 2 === 0) {
                  const once = await store.insertIdempotent(client, { ...command(2), bizKey: `k${i}` });
                  expect(once.duplicate).toBe(false);
                  committed.push(once.id);
                }
                await client.query('COMMIT');
                committed.push(id!);
              } finally {
                client.release();
              }
            }
          }),
        );
        // All committed first, so that the drain rate is the workers' own.
        workers = await startWorkers(SIZES.drain.processes, log, settings);
        const acks = new AckCounter(log);
        await until(() => acks.count() >= committed.length, 120_000);
        await stopWorkers(workers);
        const lines = readExecutionLog(log);
        const verdict = check(committed, lines, await rowsOf(committed));
        process.stdout.write(
          `\nPgBouncer drain: ${verdict.committed} committed, ${SIZES.drain.processes} processes × ${describeWorkers(settings)}, ` +
            `${drainRate(lines)}/s from first start to last success; ` +
            `lost ${verdict.lost.length}, twice ${verdict.twice.length}, stuck ${verdict.stuck.length}, ` +
            `fenced ${verdict.fenced}\n`,
        );
        expect(verdict.lost).toEqual([]);
        expect(verdict.twice).toEqual([]);
        expect(verdict.stuck).toEqual([]);
        const stderr = workers.map((w) => w.stderr()).join('');
        expect(stderr).not.toMatch(/prepared statement|unsupported startup parameter/);
      } finally {
        await stopWorkers(workers);
        await callersPool.end();
        rmSync(dir, { recursive: true, force: true });
      }
    }, 180_000);

  it('the same workers over direct connections, for comparison (drain rate printed)', async () => {
    const schema = `${SCHEMA}_direct`;
    const options = { connectionString: DIRECT_URL, poolConfig: { max: 4 }, schema, pooler: 'none' as const };
    const direct = createPostgresStore(options);
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-pgbouncer-direct-'));
    const log = join(dir, 'executions.log');
    let workers: WorkerProcess[] = [];
    try {
      await direct.migrate();
      const committed: string[] = [];
      for (let i = 0; i < SIZES.drain.commands; i += 500) {
        const batch = Array.from({ length: Math.min(500, SIZES.drain.commands - i) }, () => command(2));
        committed.push(...(await direct.transaction((tx) => direct.insert(tx, batch))));
      }
      workers = await startWorkers(SIZES.drain.processes, log, TUNED, options);
      const acks = new AckCounter(log);
      await until(() => acks.count() >= committed.length, 120_000);
      await stopWorkers(workers);
      const lines = readExecutionLog(log);
      const verdict = check(committed, lines, await direct.getMany(committed));
      process.stdout.write(
        `\nDirect drain: ${verdict.committed} committed, ${SIZES.drain.processes} processes × 4 slots, ` +
          `${drainRate(lines)}/s from first start to last success; lost ${verdict.lost.length}, ` +
          `twice ${verdict.twice.length}\n`,
      );
      expect(verdict.lost).toEqual([]);
      expect(verdict.twice).toEqual([]);
    } finally {
      await stopWorkers(workers);
      await direct.close();
      await pgAdmin(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);

  it(`with a direct listenConnection, every one of ${SIZES.latency.commands} commands is seen on its wake-up (p50/p99 printed)`, async () => {
    // A poll interval far beyond the spacing of the submits: what starts them is the wake-up.
    await latencyRun('PgBouncer + direct LISTEN', SIZES.latency.commands, 10_000, {
      listenConnection: DIRECT_URL,
    });
  }, 120_000);

  it('without a listenConnection, every command is found by the poll loop (p50/p99 printed)', async () => {
    await latencyRun('PgBouncer, polling only', Math.min(100, SIZES.latency.commands), 250, {});
  }, 120_000);
});

/**
 * Commits `count` commands one at a time, 10 ms apart (the NOTIFY riding each COMMIT), for two
 * worker processes; checks every one ran once and prints commit → start percentiles.
 */
async function latencyRun(
  label: string,
  count: number,
  pollIntervalMs: number,
  storeOptions: Record<string, unknown>,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'asynccmd-pgbouncer-latency-'));
  const log = join(dir, 'executions.log');
  const workers = await startWorkers(2, log, { ...TUNED, pollIntervalMs }, storeOptions);
  const committedAt = new Map<string, number>();
  try {
    for (let i = 0; i < count; i++) {
      const [id] = await store.transaction(async (tx) => {
        store.capabilities.commitRiding?.notify(tx);
        return store.insert(tx, [command(0)]);
      });
      committedAt.set(id!, Date.now());
      await sleep(10);
    }
    const committed = [...committedAt.keys()];
    const acks = new AckCounter(log);
    await until(() => acks.count() >= committed.length, 60_000);
    await stopWorkers(workers);
    const lines = readExecutionLog(log);
    const verdict = check(committed, lines, await rowsOf(committed));
    const latencies = lines
      .filter((l) => l.event === 'start' && committedAt.has(l.id))
      .map((l) => l.at - committedAt.get(l.id)!)
      .sort((a, b) => a - b);
    process.stdout.write(
      `\n${label}: ${committed.length} commands, commit → start p50 ${percentile(latencies, 50)} ms, ` +
        `p99 ${percentile(latencies, 99)} ms (poll interval ${pollIntervalMs} ms); ` +
        `lost ${verdict.lost.length}, twice ${verdict.twice.length}\n`,
    );
    expect(verdict.lost).toEqual([]);
    expect(verdict.twice).toEqual([]);
    expect(verdict.stuck).toEqual([]);
    expect(latencies).toHaveLength(committed.length);
  } finally {
    await stopWorkers(workers);
    rmSync(dir, { recursive: true, force: true });
  }
}
