import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommandEvent, CommandStore, TransactionOpener } from '@asynccmd/core';
import { knexTransactions } from '@asynccmd/knex';
import { kyselyTransactions } from '@asynccmd/kysely';
import { createAsyncCommands, defineTransactionalExecutor } from '@asynccmd/runtime';
import knex from 'knex';
import { Kysely, MysqlDialect, PostgresDialect, type Generated } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';
import { LoopbackProxy } from '../faults/proxy.js';
import { createPlace, ordersWith, openStore, placeName, type Dialect, type Place } from './suite.js';

/**
 * A transactional executor whose transaction an ORM opens, the ORM's connections through a
 * loopback proxy, the store's direct: every connection of the ORM cut while the attempt's
 * transaction is open. The transaction is lost through no fault of its own — whatever the ORM
 * wraps the driver's error in — so the command goes back to PENDING uncounted (`released`), runs
 * again once the ORM reconnects, and its row commits once.
 */
interface OrmOverProxy {
  readonly name: string;
  readonly open: (
    place: Place,
    port: number,
  ) => { opener: TransactionOpener<unknown>; close: () => Promise<void> };
  /** One order row through the ORM's transaction object. */
  readonly insertOrder: (tx: unknown, note: string) => Promise<void>;
}

interface Orders {
  orders: { id: Generated<number>; note: string };
}

const SERVERS: Record<Exclude<Dialect, 'sqlite'>, number> = { postgres: 5432, mysql: 3306 };

function urlThrough(place: Place, port: number): string {
  return place.dialect === 'postgres'
    ? `postgres://postgres@127.0.0.1:${port}/test`
    : `mysql://root@127.0.0.1:${port}/${place.name}`;
}

const ORMS: readonly OrmOverProxy[] = [
  {
    name: 'Knex',
    open: (place, port) => {
      const db =
        place.dialect === 'postgres'
          ? knex({
              client: 'pg',
              connection: urlThrough(place, port),
              searchPath: [place.name],
              pool: { min: 0, max: 2 },
            })
          : knex({ client: 'mysql2', connection: urlThrough(place, port), pool: { min: 0, max: 2 } });
      return { opener: knexTransactions(db) as TransactionOpener<unknown>, close: () => db.destroy() };
    },
    insertOrder: async (tx, note) => void (await (tx as knex.Knex.Transaction)('orders').insert({ note })),
  },
  {
    name: 'Kysely',
    open: (place, port) => {
      const pool = new pg.Pool({
        connectionString: urlThrough(place, port),
        max: 2,
        options: `-c search_path=${place.name}`,
      });
      // A connection that dies is reported as an 'error' event: on the pool for an idle client, on
      // the client itself while it is checked out (in a transaction), where nothing else listens
      // under Kysely, and an unheard 'error' ends the process. An application listens on both.
      pool.on('error', () => undefined);
      pool.on('connect', (client) => client.on('error', () => undefined));
      const db = new Kysely<Orders>({
        dialect:
          place.dialect === 'postgres'
            ? new PostgresDialect({ pool })
            : new MysqlDialect({ pool: createPool({ uri: urlThrough(place, port), connectionLimit: 2 }) }),
      });
      return { opener: kyselyTransactions(db) as TransactionOpener<unknown>, close: () => db.destroy() };
    },
    insertOrder: async (tx, note) =>
      void (await (tx as Kysely<Orders>).insertInto('orders').values({ note }).execute()),
  },
];

for (const dialect of ['postgres', 'mysql'] as const) {
  for (const orm of ORMS) {
    describe(`${orm.name} on ${dialect}: the ORM's connections cut mid-transaction`, () => {
      let place: Place & { drop: () => Promise<void> };
      let store: CommandStore;
      let proxy: LoopbackProxy;
      let opened: ReturnType<OrmOverProxy['open']>;
      const events: CommandEvent[] = [];
      let holding: { entered: () => void; release: Promise<void> } | null = null;

      beforeAll(async () => {
        place = await createPlace(dialect, placeName(`ormcut_${orm.name.toLowerCase()}`));
        store = openStore(place);
        await store.migrate();
        proxy = new LoopbackProxy({ host: '127.0.0.1', port: SERVERS[dialect] });
        await proxy.start();
        opened = orm.open(place, proxy.port);
      });

      afterAll(async () => {
        await opened?.close();
        await proxy?.stop();
        await store?.close();
        await place?.drop();
      });

      it('the attempt goes back to PENDING uncounted, runs again after the reconnect, and its row commits once', async () => {
        let entered = (): void => undefined;
        let release = (): void => undefined;
        const inTransaction = new Promise<void>((resolve) => (entered = resolve));
        holding = { entered: () => entered(), release: new Promise<void>((resolve) => (release = resolve)) };
        const record = defineTransactionalExecutor<unknown>()<'orm.cut', { note: string }>({
          type: 'orm.cut',
          mode: 'ASYNC_POOL',
          transactional: opened.opener,
          async execute({ note }, ctx) {
            await orm.insertOrder(ctx.tx, note);
            const hold = holding;
            holding = null;
            if (hold !== null) {
              hold.entered();
              await hold.release; // the cut falls here, with the row written and not committed
            }
          },
        });
        const commands = createAsyncCommands({ store, executors: [record], pollIntervalMs: 50 });
        commands.events.on((e) => void events.push(e));
        commands.start();
        try {
          const [id] = await commands.client.transaction((_tx, submit) =>
            Promise.all([submit('orm.cut', { note: 'cut-once' })]),
          );
          await inTransaction;
          proxy.cut(500);
          release();
          const deadline = Date.now() + 20_000;
          // The event, not the row: the row is SUCCESS as the COMMIT lands, the event a moment later.
          while (!events.some((e) => e.kind === 'succeeded' && e.command.id === id)) {
            if (Date.now() > deadline) throw new Error('the command never succeeded after the cut');
            await new Promise((r) => setTimeout(r, 50));
          }
          const mine = events.filter((e) => ('id' in e ? e.id : 'command' in e ? e.command.id : null) === id);
          const kinds = mine
            .map((e) => e.kind)
            .filter((k) => k !== 'submitted' && k !== 'claimed' && k !== 'started');
          // Released while the ORM cannot reach the server (each try of the outage), then one success.
          expect(kinds.at(-1)).toBe('succeeded');
          expect(new Set(kinds.slice(0, -1))).toEqual(new Set(['released']));
          // Losses in a row are held back a growing while: a few releases over the cut, not a hot loop.
          expect(kinds.length).toBeLessThan(12);
          const done = await store.get(id!);
          expect(done?.retryCount).toBe(0);
          expect(await ordersWith(place, 'cut-once')).toBe(1);
        } finally {
          await commands.stop({ timeoutMs: 5_000 });
        }
      });
    });
  }
}
