import { createPostgresStore, type PostgresCommandStore } from '@asynccmd/adapter-postgres';
import { createAsyncCommands } from '@asynccmd/runtime';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopbackProxy } from './proxy.js';

const PG_URL = new URL(process.env.ASYNCCMD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
const SCHEMA = `faults_reply_lost_${process.pid}`;
const TYPE = 'faults.reply-lost';

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
describe('a complete committed whose reply was lost in a cut', () => {
  const proxy = new LoopbackProxy({ host: PG_URL.hostname, port: Number(PG_URL.port || 5432) });
  const admin = new pg.Client({ connectionString: PG_URL.href });
  let direct: PostgresCommandStore;
  let store: PostgresCommandStore;
  let stopRuntime: (() => Promise<void>) | null = null;

  beforeAll(async () => {
    await proxy.start();
    await admin.connect();
    direct = createPostgresStore({ connectionString: PG_URL.href, schema: SCHEMA });
    await direct.migrate();
    const through = new URL(PG_URL.href);
    through.hostname = '127.0.0.1';
    through.port = String(proxy.port);
    store = createPostgresStore({
      connectionString: through.href,
      schema: SCHEMA,
      listenReconnectMinMs: 50,
      listenReconnectMaxMs: 500,
    });
  });

  afterAll(async () => {
    await stopRuntime?.();
    await store.close();
    await direct.close();
    await proxy.stop();
    await admin.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
    await admin.end();
  });

  it('the retried complete finds its own success: succeeded, not fenced', async () => {
    let started!: () => void;
    const executing = new Promise<void>((resolve) => (started = resolve));
    let finish!: () => void;
    const finishing = new Promise<void>((resolve) => (finish = resolve));
    const outcomes: [string, string][] = [];
    const runtime = createAsyncCommands({
      store,
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
    const locker = new pg.Client({ connectionString: PG_URL.href });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query(`SELECT id FROM "${SCHEMA}".async_command WHERE id = $1 FOR UPDATE`, [id]);
      finish();
      await until('the complete waiting on the row lock', async () => {
        const { rows } = await admin.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_activity
           WHERE wait_event_type = 'Lock' AND query LIKE '%SET status = ''SUCCESS''%'
             AND query LIKE $1`,
          [`%${SCHEMA}%`],
        );
        return Number(rows[0]?.n) > 0;
      });
      // The cut: the runtime sees its connection lost; the server still holds the statement.
      proxy.cut(2_000);
      await locker.query('COMMIT');
    } finally {
      await locker.end();
    }
    // The server committed the complete; its answer had nowhere to go.
    await until('the first complete committed', async () => (await direct.get(id!))?.status === 'SUCCESS');
    await until('the runtime reported the outcome', async () => outcomes.length > 0);
    expect(outcomes).toEqual([['succeeded', id]]);
    expect(await direct.get(id!)).toMatchObject({ status: 'SUCCESS', lastError: null });
  });
});
