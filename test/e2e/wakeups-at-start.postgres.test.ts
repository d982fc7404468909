import { createPostgresStore } from '@asynccmd/adapter-postgres';
import { createAsyncCommands, defineExecutor } from '@asynccmd/runtime';
import type { CommandEvent } from '@asynccmd/core';
import { createServer, connect, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const DATABASE_URL = process.env.ASYNCCMD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `wake_start_${process.pid}_${Math.floor(Math.random() * 1e6)}`;

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function waitFor(what: string, condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * A loopback TCP gate in front of the server: connections through it wait, their bytes held,
 * until open() — so the LISTEN connection comes up exactly when the test says.
 */
class Gate {
  readonly #held: Socket[] = [];
  readonly #sockets = new Set<Socket>();
  #open = false;
  #server: Server | null = null;
  port = 0;

  async start(): Promise<void> {
    const server = createServer((client) => {
      client.on('error', () => undefined);
      client.pause();
      this.#sockets.add(client);
      if (this.#open) this.#pipe(client);
      else this.#held.push(client);
    });
    this.#server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('gate has no TCP address');
    this.port = address.port;
  }

  get waiting(): number {
    return this.#held.length;
  }

  open(): void {
    this.#open = true;
    for (const client of this.#held.splice(0)) this.#pipe(client);
  }

  #pipe(client: Socket): void {
    const { hostname, port } = new URL(DATABASE_URL);
    const upstream = connect(Number(port || 5432), hostname);
    upstream.on('error', () => undefined);
    this.#sockets.add(upstream);
    for (const s of [client, upstream]) s.once('close', () => (client.destroy(), upstream.destroy()));
    client.pipe(upstream);
    upstream.pipe(client);
    client.resume();
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise((resolve) => this.#server?.close(resolve));
  }
}

const gate = new Gate();

beforeAll(async () => {
  await gate.start();
});

afterAll(async () => {
  await gate.close();
  await admin(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
});

describe('PostgreSQL wake-ups at start', () => {
  it('a command committed while the LISTEN connection is still coming up starts long before the next poll', async () => {
    const url = new URL(DATABASE_URL);
    url.host = `127.0.0.1:${gate.port}`;
    const consumerStore = createPostgresStore({
      connectionString: DATABASE_URL,
      schema,
      listenConnection: url.toString(),
    });
    await consumerStore.migrate();
    const started: number[] = [];
    const job = defineExecutor<'start.job', { n: number }>({
      type: 'start.job',
      mode: 'ASYNC_POOL',
      execute: async ({ n }) => void started.push(n),
    });
    // Polls once a minute: within the test only a wake-up can start the command.
    const consumer = createAsyncCommands({ store: consumerStore, executors: [job], pollIntervalMs: 60_000 });
    const producer = createAsyncCommands({
      store: createPostgresStore({ connectionString: DATABASE_URL, schema }),
      executors: [],
      submitOnlyTypes: ['start.job'],
    });
    const events: CommandEvent[] = [];
    consumer.on((e) => events.push(e));
    try {
      consumer.start();
      // The first round has run (and found nothing) while the LISTEN connection waits at the gate.
      await waitFor('the first round', () => events.some((e) => e.kind === 'round'), 10_000);
      await waitFor('the LISTEN connection at the gate', () => gate.waiting > 0, 10_000);
      // Its NOTIFY reaches no listener of the consumer's: none is up yet.
      await producer.client.transaction((tx) =>
        producer.client.submit(tx, 'start.job' as never, { n: 1 } as never),
      );
      expect(started).toEqual([]);
      gate.open();
      await waitFor('the command to start', () => started.includes(1), 10_000);
      expect(consumerStore.wakeups.listening).toBe(true);
    } finally {
      await producer.stop({ timeoutMs: 2_000 });
      await consumer.stop({ timeoutMs: 2_000 });
    }
  }, 30_000);
});
