import { createMysqlStore } from '@asynccmd/adapter-mysql';
import { createPostgresStore } from '@asynccmd/adapter-postgres';
import type { CommandStore } from '@asynccmd/core';
import { createAsyncCommands } from '@asynccmd/runtime';
import { createConnection } from 'mysql2/promise';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopbackProxy } from './proxy.js';

const PG_URL = new URL(process.env.ASYNCCMD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
const MYSQL_URL = new URL(process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306');
const NAMESPACE = `faults_reply_lost_${process.pid}`;
const TYPE = 'faults.reply-lost';

/** What the test needs of one database: its stores, a session that can lock a row, and a probe. */
interface ReplyLostTarget {
  readonly name: string;
  readonly server: { readonly host: string; readonly port: number };
  /** Creates the namespace; returns a migrated store over direct connections and one through `proxyPort`. */
  open(proxyPort: number): Promise<{ direct: CommandStore; through: CommandStore }>;
  /** Locks the command's row in an open transaction; the returned function commits it. */
  lockRow(id: string): Promise<() => Promise<void>>;
  /** True while the store's complete statement is executing on the server (waiting on the lock). */
  completeWaiting(): Promise<boolean>;
  drop(): Promise<void>;
}

function withPort(url: URL, port: number, path?: string): string {
  const copy = new URL(url.href);
  copy.hostname = '127.0.0.1';
  copy.port = String(port);
  if (path !== undefined) copy.pathname = `/${path}`;
  return copy.href;
}

const postgres: ReplyLostTarget = {
  name: 'postgres',
  server: { host: PG_URL.hostname, port: Number(PG_URL.port || 5432) },
  async open(proxyPort) {
    const direct = createPostgresStore({ connectionString: PG_URL.href, schema: NAMESPACE });
    await direct.migrate();
    const through = createPostgresStore({
      connectionString: withPort(PG_URL, proxyPort),
      schema: NAMESPACE,
      listenReconnectMinMs: 50,
      listenReconnectMaxMs: 500,
    });
    return { direct, through };
  },
  async lockRow(id) {
    const locker = new pg.Client({ connectionString: PG_URL.href });
    await locker.connect();
    await locker.query('BEGIN');
    await locker.query(`SELECT id FROM "${NAMESPACE}".async_command WHERE id = $1 FOR UPDATE`, [id]);
    return async () => {
      await locker.query('COMMIT');
      await locker.end();
    };
  },
  async completeWaiting() {
    const client = new pg.Client({ connectionString: PG_URL.href });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity
         WHERE wait_event_type = 'Lock' AND query LIKE '%WITH done AS%DELETE FROM%' AND query LIKE $1`,
        [`%${NAMESPACE}%`],
      );
      return Number(rows[0]?.n) > 0;
    } finally {
      await client.end();
    }
  },
  async drop() {
    const client = new pg.Client({ connectionString: PG_URL.href });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${NAMESPACE}" CASCADE`);
    await client.end();
  },
};

async function mysqlQuery<R>(sql: string, values: unknown[] = []): Promise<R[]> {
  const conn = await createConnection(MYSQL_URL.href);
  try {
    return (await conn.query(sql, values))[0] as R[];
  } finally {
    await conn.end();
  }
}

const mysql: ReplyLostTarget = {
  name: 'mysql',
  server: { host: MYSQL_URL.hostname, port: Number(MYSQL_URL.port || 3306) },
  async open(proxyPort) {
    await mysqlQuery(`CREATE DATABASE \`${NAMESPACE}\` CHARACTER SET utf8mb4`);
    const direct = createMysqlStore({ connection: withPort(MYSQL_URL, this.server.port, NAMESPACE) });
    await direct.migrate();
    const through = createMysqlStore({ connection: withPort(MYSQL_URL, proxyPort, NAMESPACE) });
    return { direct, through };
  },
  async lockRow(id) {
    const locker = await createConnection(MYSQL_URL.href);
    await locker.query('BEGIN');
    await locker.query(`SELECT id FROM \`${NAMESPACE}\`.async_command WHERE id = ? FOR UPDATE`, [id]);
    return async () => {
      await locker.query('COMMIT');
      await locker.end();
    };
  },
  async completeWaiting() {
    const [row] = await mysqlQuery<{ n: number }>(
      `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST
       WHERE DB = ? AND INFO LIKE '%SET status = ''SUCCESS''%'`,
      [NAMESPACE],
    );
    return Number(row?.n) > 0;
  },
  async drop() {
    await mysqlQuery(`DROP DATABASE IF EXISTS \`${NAMESPACE}\``);
  },
};

/** Polls `probe` every 20 ms until it is true; throws `what` after 20 s. */
async function until(what: string, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${what}`);
    await sleep(20);
  }
}

/**
 * A complete whose reply is lost: the server commits it, the connection is cut before the answer
 * comes back, and the runtime writes it again once the connection is back. That second write finds
 * its own success and must report the command succeeded, not fenced.
 */
for (const target of [postgres, mysql]) {
  describe(`a complete committed whose reply was lost in a cut, on ${target.name}`, () => {
    const proxy = new LoopbackProxy(target.server);
    let stores: { direct: CommandStore; through: CommandStore } | null = null;
    let stopRuntime: (() => Promise<void>) | null = null;

    beforeAll(async () => {
      await proxy.start();
      stores = await target.open(proxy.port);
    });

    afterAll(async () => {
      await stopRuntime?.();
      await stores?.through.close();
      await stores?.direct.close();
      await proxy.stop();
      await target.drop();
    });

    it('the retried complete finds its own success: succeeded, not fenced', async () => {
      const { direct, through } = stores!;
      let started!: () => void;
      const executing = new Promise<void>((resolve) => (started = resolve));
      let finish!: () => void;
      const finishing = new Promise<void>((resolve) => (finish = resolve));
      const outcomes: [string, string][] = [];
      const runtime = createAsyncCommands({
        store: through,
        // No heartbeat or reclaim while the test holds the row: only the complete touches it.
        leaseMs: 120_000,
        heartbeatIntervalMs: 60_000,
        pollIntervalMs: 50,
        executors: [
          {
            type: TYPE,
            mode: 'ASYNC_POOL',
            execute: async () => {
              started();
              await finishing;
            },
          },
        ],
      });
      stopRuntime = () => runtime.stop({ timeoutMs: 5_000 });
      runtime.events.onKind('succeeded', (e) => outcomes.push([e.kind, String(e.command.id)]));
      runtime.events.onKind('fenced', (e) => outcomes.push([e.kind, String(e.command.id)]));
      runtime.start();
      const [id] = await direct.transaction((tx) =>
        direct.insert(tx, [{ type: TYPE, payloadJson: '{}', maxRetry: 0 }]),
      );
      await executing;

      // A lock on the row holds the complete's UPDATE on the server until the connection is cut.
      const release = await target.lockRow(String(id));
      try {
        finish();
        await until('the complete waiting on the row lock', () => target.completeWaiting());
        // The cut: the runtime sees its connection lost; the server still holds the statement.
        proxy.cut(2_000);
      } finally {
        await release();
      }
      // The server committed the complete; its answer had nowhere to go.
      await until('the first complete committed', async () => (await direct.get(id!))?.status === 'SUCCESS');
      await until('the runtime reported the outcome', async () => outcomes.length > 0);
      expect(outcomes).toEqual([['succeeded', String(id)]]);
      expect(await direct.get(id!)).toMatchObject({ status: 'SUCCESS', lastError: null });
    });
  });
}
