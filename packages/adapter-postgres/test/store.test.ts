import { randomUUID } from 'node:crypto';
import * as E from 'fp-ts/lib/Either.js';
import { decideFailure, exponentialBackoff, isAsyncCommandError } from '@asynccmd/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commit } from '../src/pipeline/commit.js';
import { tableNames } from '../src/names.js';
import { buildSql } from '../src/sql.js';
import { createPostgresStore } from '../src/index.js';
import { MIGRATIONS } from '../src/migrations.js';
import type { PostgresCommandStore } from '../src/index.js';
import pg from 'pg';
import {
  adminQuery,
  command,
  DATABASE_URL,
  dropSchema,
  migrateUpTo,
  openStore,
  uniqueSchema,
} from './helpers.js';
import { COMMAND_TABLE_COLUMNS, rescueLimitMessage } from '@asynccmd/core/store-kit';

const schema = uniqueSchema('acpg_store');
let store: PostgresCommandStore;

beforeAll(async () => {
  store = await openStore(schema);
});

afterAll(async () => {
  await store?.close();
  await dropSchema(schema);
});

const claim = (types: string[], limit = 10, leaseMs = 30_000, now = new Date(Date.now() + 1)) =>
  store.claimDue({ types, limit, now, token: randomUUID(), leaseMs });

async function untilDatabaseClockPasses(t: Date): Promise<void> {
  while ((await store.now()).getTime() <= t.getTime()) await new Promise((r) => setTimeout(r, 2));
}

/**
 * Calls `onMessage` with the type and body of each protocol message `tx` writes from now on, until
 * `restoreSyncs` — after the commit, which must be watched too.
 */
const restores: (() => void)[] = [];
function watchMessages(tx: pg.PoolClient, onMessage: (type: string, body: Buffer) => void): void {
  const stream = (tx as unknown as { connection: { stream: { write: (chunk: unknown) => boolean } } })
    .connection.stream;
  const write = stream.write;
  stream.write = function (this: unknown, ...args: unknown[]) {
    // Walk the messages: a type byte, then a length that counts itself, then the body.
    const chunk = args[0];
    if (Buffer.isBuffer(chunk)) {
      for (let at = 0; at + 5 <= chunk.length; at += 1 + chunk.readInt32BE(at + 1)) {
        onMessage(
          String.fromCharCode(chunk[at]!),
          chunk.subarray(at + 5, at + 1 + chunk.readInt32BE(at + 1)),
        );
      }
    }
    return (write as (...a: unknown[]) => boolean).apply(this, args);
  };
  restores.push(() => (stream.write = write));
}

/** Calls `onSync` for each Sync `tx` writes (a batch or a query ends with one: a round trip each). */
function countSyncs(tx: pg.PoolClient, onSync: () => void): void {
  watchMessages(tx, (type) => type === 'S' && onSync());
}

/** The prepared statements `tx` binds from now on, by name (a Bind body: portal, then statement). */
function boundStatements(tx: pg.PoolClient): string[] {
  const names: string[] = [];
  watchMessages(tx, (type, body) => {
    if (type !== 'B') return;
    const from = body.indexOf(0) + 1;
    names.push(body.toString('utf8', from, body.indexOf(0, from)));
  });
  return names;
}
function restoreSyncs(): void {
  for (const restore of restores.splice(0)) restore();
}

/** Lets the store take ids ahead (a refill follows the first submit), so submits are held back. */
async function warmIdReserve(): Promise<void> {
  await store.transaction((tx) => store.insert(tx, [command('held.warm-up')]));
  await new Promise((r) => setTimeout(r, 50));
}

/** Claims the due 'up.keyed' commands of `on` as keyed ones (the upgrade tests' claim). */
const claimUpKeyed = (on: PostgresCommandStore) =>
  on.claimDue({
    types: ['up.keyed'],
    keyedTypes: ['up.keyed'],
    limit: 10,
    now: new Date(Date.now() + 60_000),
    token: randomUUID(),
    leaseMs: 30_000,
  });

describe('PostgresCommandStore', () => {
  it('refuses hostile schema and table names with a typed error', () => {
    const hostile = ['x"; DROP TABLE t; --', 'a b', '1abc', '', 'x'.repeat(49), 'é', 'a-b'];
    const cases = [...hostile.flatMap((bad) => [{ schema: bad }, { table: bad }]), { schema: 'pg_catalog' }];
    {
      for (const opts of cases) {
        let caught: unknown;
        try {
          createPostgresStore({ connectionString: 'postgres://unused', ...opts });
        } catch (e) {
          caught = e;
        }
        expect(isAsyncCommandError(caught) && caught.code).toBe('INVALID_IDENTIFIER');
      }
    }
  });

  it('takes `pool` or `connection` (a URI or pool options), as the other adapters do, and refuses two at once', async () => {
    for (const connection of [DATABASE_URL, { connectionString: DATABASE_URL, max: 1 }]) {
      const store = createPostgresStore({ connection, schema: uniqueSchema('conn') });
      try {
        await store.ping();
        expect(store.pool.options.max).toBe(typeof connection === 'string' ? 10 : 1);
      } finally {
        await store.close();
      }
    }
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    try {
      for (const both of [
        { pool, connection: DATABASE_URL },
        { pool, connectionString: DATABASE_URL },
        { connection: DATABASE_URL, poolConfig: { max: 1 } },
      ]) {
        expect(() => createPostgresStore(both)).toThrow(
          expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
        );
      }
    } finally {
      await pool.end();
    }
  });

  it('refuses an unset destination (`connection: process.env.UNSET`) at construction, as the other adapters do', () => {
    for (const unset of [
      { connection: undefined },
      { connectionString: undefined },
      { connection: '' },
      { pool: undefined },
      { connection: undefined, schema: 'app' },
    ]) {
      let caught: unknown;
      try {
        createPostgresStore(unset);
      } catch (e) {
        caught = e;
      }
      expect(isAsyncCommandError(caught) && caught.code).toBe('INVALID_ARGUMENT');
      const key = Object.keys(unset)[0] ?? '';
      expect((caught as Error).message).toContain(`\`${key}\``);
    }
  });

  it('an upgrade to the flow keys keys the unfinished commands already stored', async () => {
    const upgraded = uniqueSchema('acpg_flow_up');
    const flowKeys = MIGRATIONS.find((m) => m.name === 'flow keys')!;
    const t = `"${upgraded}".async_command`;
    let before = await openStore(upgraded);
    try {
      await before.keyLimits.declare([{ type: 'up.keyed', keyField: 'tenant', maxRunning: 1 }]);
      await before.transaction((tx) =>
        before.insert(tx, [
          command('up.keyed', { tenant: 'acme' }),
          command('up.keyed', { tenant: 'acme' }),
          command('up.keyed', { tenant: 'zeta' }),
        ]),
      );
      await before.close();
      // The table as the version before left it: no key table, column or index, the version unrecorded.
      await adminQuery(`DROP TABLE "${upgraded}".async_command_key_fields`);
      await adminQuery(`ALTER TABLE ${t} DROP COLUMN flow_key`);
      await adminQuery(`DELETE FROM "${upgraded}".async_command_migrations WHERE version = $1`, [
        flowKeys.version,
      ]);
      before = await openStore(upgraded);
      const keys = await adminQuery<{ k: string }>(`SELECT flow_key AS k FROM ${t} ORDER BY id`);
      expect(keys.map((r) => r.k)).toEqual(['acme', 'acme', 'zeta']);
      const claimed = await claimUpKeyed(before);
      expect(claimed.map((c) => (c.payload as { tenant: string }).tenant).sort()).toEqual(['acme', 'zeta']);
    } finally {
      await before.close();
      await dropSchema(upgraded);
    }
  });

  it('a database at version 19 migrates through the flow keys (20), then the history (21), and moves what finished before', async () => {
    const upgraded = uniqueSchema('acpg_hist_up');
    const t = `"${upgraded}".async_command`;
    const store19 = createPostgresStore({
      connectionString: DATABASE_URL,
      schema: upgraded,
      poolConfig: { max: 2 },
    });
    try {
      await migrateUpTo(store19, 19);
      // What a store of version 19 left: a key limit, an unfinished keyed command, one finished in place.
      await adminQuery(`INSERT INTO "${upgraded}".async_command_key_limits (type, key_field, max_running)
        VALUES ('up.keyed', 'tenant', 1)`);
      await adminQuery(`INSERT INTO ${t} (type, payload, max_retry, next_run_at, created_at, updated_at)
        VALUES ('up.keyed', '{"tenant":"acme"}', 3, now(), now(), now())`);
      await adminQuery(`INSERT INTO ${t} (type, payload, status, max_retry, next_run_at, created_at, updated_at, finished_at)
        VALUES ('up.keyed', '{"tenant":"zeta"}', 'SUCCESS', 3, now(), now(), now(), now())`);
      const [pending, finished] = await adminQuery<{ id: string }>(
        `SELECT id::text AS id FROM ${t} ORDER BY id`,
      );
      await store19.migrate();
      const versions = await adminQuery(
        `SELECT version, name FROM "${upgraded}".async_command_migrations WHERE version > 19 ORDER BY version`,
      );
      expect(versions).toEqual([
        { version: 20, name: 'flow keys' },
        { version: 21, name: 'finished commands leave the command table' },
        { version: 22, name: 'dependants settled by the completing statement' },
        { version: 23, name: 'claims past a slow head' },
        { version: 24, name: 'creation index without the id' },
        { version: 25, name: 'history in time partitions' },
        { version: 26, name: 'submit windows' },
        { version: 27, name: 'key weights' },
        { version: 28, name: 'claims per type' },
      ]);
      // Keyed by the flow keys' migration; the finished row moved by the upgrade, unkeyed, reading as before.
      const where = await adminQuery<{ id: string; place: string; k: string | null }>(
        `SELECT id::text AS id, 'command' AS place, flow_key AS k FROM ${t}
         UNION ALL SELECT id::text, 'history', flow_key FROM "${upgraded}".async_command_history ORDER BY 1`,
      );
      expect(where).toEqual([
        { id: pending!.id, place: 'command', k: 'acme' },
        { id: finished!.id, place: 'history', k: null },
      ]);
      expect(await store19.get(finished!.id)).toMatchObject({
        status: 'SUCCESS',
        payload: { tenant: 'zeta' },
      });
      const claimed = await claimUpKeyed(store19);
      expect(claimed.map((c) => c.id)).toEqual([pending!.id]);
      expect(await store19.complete([{ id: pending!.id, token: claimed[0]!.claimToken }])).toEqual([
        pending!.id,
      ]);
      const moved = await adminQuery<{ k: string }>(
        `SELECT flow_key AS k FROM "${upgraded}".async_command_history WHERE id = $1::bigint`,
        [pending!.id],
      );
      expect(moved).toEqual([{ k: 'acme' }]);
    } finally {
      await store19.close();
      await dropSchema(upgraded);
    }
  });

  it('creates the schema, table and indexes; migrating again, and concurrently, is harmless', async () => {
    const peers = await Promise.all([openStore(schema), openStore(schema), openStore(schema)]);
    await Promise.all(peers.map((p) => p.migrate()));
    await Promise.all(peers.map((p) => p.close()));
    const versions = await adminQuery(
      `SELECT version FROM "${schema}".async_command_migrations ORDER BY version`,
    );
    expect(versions).toEqual(MIGRATIONS.map((m) => ({ version: m.version })));
    // Migration 14: the result, json as payload is (kept as written).
    const types = await adminQuery<{ column_name: string; data_type: string }>(
      `SELECT column_name, data_type FROM information_schema.columns
       WHERE table_schema = $1 AND table_name = 'async_command' AND column_name IN ('payload', 'result')
       ORDER BY column_name`,
      [schema],
    );
    expect(types).toEqual([
      { column_name: 'payload', data_type: 'json' },
      { column_name: 'result', data_type: 'json' },
    ]);
    expect(MIGRATIONS.at(-1)).toMatchObject({ version: 28, name: 'claims per type' });
    const indexes = await adminQuery<{ indexname: string }>(
      'SELECT indexname FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname',
      [schema],
    );
    expect(indexes.map((i) => i.indexname)).toEqual(
      [
        'async_command_active_key',
        'async_command_claim_type_idx',
        'async_command_created_at_idx',
        'async_command_dead_idx',
        'async_command_dependant_idx',
        'async_command_dependencies_pkey',
        'async_command_due_idx',
        'async_command_flow_idx',
        'async_command_h_created_idx',
        'async_command_h_finished_idx',
        'async_command_h_type_biz_idx',
        'async_command_history_pkey',
        'async_command_h_default_created_at_id_idx',
        'async_command_h_default_finished_at_idx',
        'async_command_h_default_pkey',
        'async_command_h_default_type_biz_key_idx',
        'async_command_hp_biz_idx',
        'async_command_hp_created_idx',
        'async_command_hp_finish_idx',
        'async_command_keyed_idx',
        'async_command_key_fields_pkey',
        'async_command_key_limits_pkey',
        'async_command_key_rate_buckets_pkey',
        'async_command_key_rate_limits_pkey',
        'async_command_lease_idx',
        'async_command_pkey',
        'async_command_type_biz_idx',
        'async_command_migrations_pkey',
        'async_command_outcome_idx',
        'async_command_paused_types_pkey',
        'async_command_rate_limits_pkey',
        'async_command_schedule_tick',
        'async_command_schedules_pkey',
        'async_command_step_cmd_idx',
        'async_command_submit_windows_opens',
        'async_command_submit_windows_pkey',
        'async_command_type_limits_pkey',
        'async_command_workflow_steps_pkey',
      ].sort(),
    );
  });

  it('submits inside the caller transaction: rollback leaves nothing, commit keeps all, in order', async () => {
    await expect(
      store.transaction(async (tx) => {
        await store.insert(tx, [command('rollback.me')]);
        throw new Error('business failed');
      }),
    ).rejects.toThrow('business failed');
    expect((await store.list({ type: 'rollback.me' })).items).toHaveLength(0);

    const ids = await store.transaction((tx) =>
      store.insert(tx, [
        command('batch', { n: 1 }),
        command('batch', { n: 2, text: 'quote " backslash \\ nul \u0000 ☃ 😀' }, { bizKey: 'b-2' }),
        command('batch', { n: 3 }, { headers: { traceparent: '00-abc-def-01' }, owner: 'orders' }),
      ]),
    );
    expect(ids).toHaveLength(3);
    expect([...ids].sort((a, b) => Number(a) - Number(b))).toEqual(ids);
    const rows = await store.getMany(ids);
    expect(rows.map((r) => (r.payload as { n: number }).n)).toEqual([1, 2, 3]);
    expect(rows[1]?.payload).toEqual({ n: 2, text: 'quote " backslash \\ nul \u0000 ☃ 😀' });
    expect(rows[1]?.bizKey).toBe('b-2');
    expect(rows[2]?.headers).toEqual({ traceparent: '00-abc-def-01' });
    expect(rows[2]?.owner).toBe('orders');
    expect(rows[0]).toMatchObject({ status: 'PENDING', retryCount: 0, rescueCount: 0, idempotent: false });
  });

  it("ends an aborted transaction with the connection's first COMMIT, prepared there and then", async () => {
    const fresh = createPostgresStore({ connectionString: DATABASE_URL, schema, poolConfig: { max: 1 } });
    try {
      const attempt = fresh.transaction(async (tx) => {
        await tx.query('SELECT 1/0').catch(() => undefined);
      });
      await expect(attempt).rejects.toMatchObject({ code: 'TRANSACTION_ROLLED_BACK' });
      const { rows } = await fresh.pool.query<{ name: string }>(
        `SELECT name FROM pg_prepared_statements WHERE name LIKE 'asynccmd\\_%' ORDER BY name`,
      );
      expect(rows.map((r) => r.name)).toEqual(['asynccmd_begin_read_committed', 'asynccmd_commit']);
    } finally {
      await fresh.close();
    }
  });

  it('reports a transaction whose COMMIT rolled back (a failed statement was caught) as an error', async () => {
    const attempt = store.transaction(async (tx) => {
      await store.insert(tx, [command('swallowed.failure')]);
      // The application catches a failed statement and carries on: PostgreSQL has aborted the
      // transaction, and its COMMIT answers ROLLBACK.
      await tx.query('SELECT 1/0').catch(() => undefined);
      return 'looked fine';
    });
    await expect(attempt).rejects.toMatchObject({ code: 'TRANSACTION_ROLLED_BACK' });
    expect((await store.list({ type: 'swallowed.failure' })).items).toHaveLength(0);
    // The connection went back to the pool in a usable state.
    await expect(
      store.transaction((tx) => store.insert(tx, [command('after.rollback')])),
    ).resolves.toHaveLength(1);
  });

  it('rejects a submit behind a failed statement the application caught with TRANSACTION_ROLLED_BACK, on every insert path', async () => {
    // A fresh store: no ids taken ahead yet, so its first single submit goes out at once.
    const fresh = createPostgresStore({ connectionString: DATABASE_URL, schema, poolConfig: { max: 2 } });
    type Submit = (tx: pg.PoolClient) => Promise<unknown>;
    const paths: [string, Submit][] = [
      ['a first submit, sent at once', (tx) => fresh.insert(tx, [command('doomed.one')])],
      ['a batch', (tx) => fresh.insert(tx, [command('doomed.many'), command('doomed.many')])],
      [
        'an idempotent submit',
        (tx) => fresh.insertIdempotent(tx, { ...command('doomed.idem'), bizKey: 'doomed-1' }),
      ],
    ];
    try {
      for (const [label, submit] of paths) {
        let submitError: unknown = 'resolved';
        const attempt = fresh.transaction(async (tx) => {
          await tx.query('SELECT 1/0').catch(() => undefined);
          await submit(tx).catch((e: unknown) => {
            submitError = e;
            throw e;
          });
        });
        await expect(attempt, label).rejects.toMatchObject({ code: 'TRANSACTION_ROLLED_BACK' });
        expect(submitError, label).toMatchObject({ code: 'TRANSACTION_ROLLED_BACK' });
      }
      // In a transaction the application runs itself on its own connection.
      const client = await fresh.pool.connect();
      try {
        await client.query('BEGIN');
        await client.query('SELECT 1/0').catch(() => undefined);
        for (const [label, submit] of paths) {
          await expect(submit(client), label).rejects.toMatchObject({ code: 'TRANSACTION_ROLLED_BACK' });
        }
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      for (const type of ['doomed.one', 'doomed.many', 'doomed.idem']) {
        expect((await fresh.list({ type })).items).toEqual([]);
      }
    } finally {
      await fresh.close();
    }
  });

  it('commits even when the statement sent with COMMIT fails, and says so', async () => {
    const client = await store.pool.connect();
    try {
      await client.query('BEGIN');
      await store.insert(client, [command('commit.then.fail')]);
      const outcome = await commit(client, { statement: 'SELECT 1/0' });
      expect(outcome.afterError?.message).toMatch(/division by zero/);
      await client.query('SELECT 1'); // (the status is read off the server's next ReadyForQuery)
      expect(client.getTransactionStatus()).toBe('I');
      // A failed COMMIT (deferred check) rejects; nothing after it ran.
      await client.query('BEGIN');
      await client.query('SET CONSTRAINTS ALL DEFERRED');
      await client.query(
        'CREATE TEMP TABLE deferred_fk (id int PRIMARY KEY, parent int REFERENCES deferred_fk DEFERRABLE)',
      );
      await client.query('INSERT INTO deferred_fk VALUES (1, 2)');
      await expect(commit(client, { statement: "SELECT pg_notify('never', '')" })).rejects.toMatchObject({
        code: '23503',
      });
      await client.query('SELECT 1');
      expect(client.getTransactionStatus()).toBe('I');
    } finally {
      client.release();
    }
    expect((await store.list({ type: 'commit.then.fail' })).items).toHaveLength(1);
  });

  it('claims by id with the COMMIT of a store transaction, after it, in the same round trip', async () => {
    const token = randomUUID();
    let id = '';
    let claimed: Promise<unknown> | null = null;
    await store.transaction(async (tx) => {
      [id] = (await store.insert(tx, [command('ride.along')])) as [string];
      claimed = store.claimByIdOnCommit(tx, { id, now: new Date(Date.now() + 1000), token, leaseMs: 30_000 });
      expect(claimed).not.toBeNull();
      // A second one in the same transaction is left to claimById after commit.
      expect(store.claimByIdOnCommit(tx, { id, now: new Date(), token, leaseMs: 30_000 })).toBeNull();
    });
    await expect(claimed).resolves.toMatchObject({ id, status: 'RUNNING', claimToken: token });
    expect(await store.get(id)).toMatchObject({ status: 'RUNNING', claimToken: token });
    await store.complete([{ id, token }]);

    // Rolled back: nothing to claim, and the promise still settles.
    let gone: Promise<unknown> | null = null;
    await expect(
      store.transaction(async (tx) => {
        const [other] = await store.insert(tx, [command('ride.rolled.back')]);
        gone = store.claimByIdOnCommit(tx, { id: other!, now: new Date(), token, leaseMs: 30_000 });
        throw new Error('business failed');
      }),
    ).rejects.toThrow('business failed');
    await expect(gone).resolves.toBeNull();

    // Not due yet, or of another type: committed PENDING, not claimed.
    const later = new Date(Date.now() + 60_000);
    const notDue = await store.transaction(async (tx) => {
      const [other] = await store.insert(tx, [command('ride.later', {}, { runAt: later })]);
      return {
        id: other!,
        claimed: store.claimByIdOnCommit(tx, { id: other!, now: new Date(), token, leaseMs: 1000 }),
      };
    });
    await expect(notDue.claimed).resolves.toBeNull();
    expect((await store.get(notDue.id))?.status).toBe('PENDING');
    const wrongType = await store.transaction(async (tx) => {
      const [other] = await store.insert(tx, [command('ride.other')]);
      // Wrapped: returning the promise itself would make the transaction wait for its own COMMIT.
      return {
        claimed: store.claimByIdOnCommit(tx, {
          id: other!,
          now: later,
          token,
          leaseMs: 1000,
          types: ['ride "quoted" \\ type'],
        }),
      };
    });
    await expect(wrongType.claimed).resolves.toBeNull();
  });

  it('claims on commit only in its own open transactions, and prepares the claim once per connection', async () => {
    const own = await store.pool.connect();
    try {
      expect(
        store.claimByIdOnCommit(own, { id: '1', now: new Date(), token: randomUUID(), leaseMs: 1000 }),
      ).toBeNull();
    } finally {
      own.release();
    }
    // Many in a row (the pool reuses its connections): each claimed, the statement parsed once each.
    for (let i = 0; i < 12; i++) {
      const token = randomUUID();
      const claimed = await store.transaction(async (tx) => {
        const [id] = await store.insert(tx, [command('ride.again')]);
        return {
          id: id!,
          row: store.claimByIdOnCommit(tx, {
            id: id!,
            now: new Date(Date.now() + 1000),
            token,
            leaseMs: 30_000,
          }),
        };
      });
      await expect(claimed.row).resolves.toMatchObject({ id: claimed.id, claimToken: token });
    }
  });

  it('prepares a named statement sent with COMMIT once per connection, and again after a failed batch', async () => {
    const client = await store.pool.connect();
    const ride = (divisor: string) => ({
      name: 'acpg_test_ride',
      text: 'SELECT 6 / $1::int AS q',
      values: [divisor],
    });
    try {
      for (const divisor of ['2', '3']) {
        await client.query('BEGIN');
        await expect(commit(client, { query: ride(divisor) })).resolves.toEqual({
          afterError: null,
          rows: [{ q: String(6 / Number(divisor)) }],
        });
      }
      await client.query('BEGIN');
      const failed = await commit(client, { query: ride('0') });
      expect(failed.afterError?.message).toMatch(/division by zero/);
      // pg's own named-query path agrees with what the batches prepared.
      await expect(
        client.query({ name: 'acpg_test_ride', text: 'SELECT 6 / $1::int AS q', values: ['6'] }),
      ).resolves.toMatchObject({ rows: [{ q: 1 }] });
      const prepared = await client.query(
        `SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = 'acpg_test_ride'`,
      );
      expect(prepared.rows[0]).toEqual({ n: 1 });
    } finally {
      client.release(true);
    }
  });

  it('holds BEGIN back until the first statement: business writes first or the submit first, both atomic', async () => {
    await adminQuery(`CREATE TABLE IF NOT EXISTS "${schema}".business (id int PRIMARY KEY)`);
    const business = async () =>
      (await adminQuery<{ id: number }>(`SELECT id FROM "${schema}".business ORDER BY id`)).map((r) => r.id);
    // Business write first (BEGIN goes out just ahead of it), then the submit; rolled back together.
    await expect(
      store.transaction(async (tx) => {
        await tx.query(`INSERT INTO "${schema}".business VALUES (1)`);
        await store.insert(tx, [command('deferred.first.business')]);
        throw new Error('business failed');
      }),
    ).rejects.toThrow('business failed');
    // The submit first (BEGIN and the INSERT in one round trip), then business writes; rolled back together.
    await expect(
      store.transaction(async (tx) => {
        await store.insert(tx, [command('deferred.first.submit')]);
        await tx.query(`INSERT INTO "${schema}".business VALUES (2)`);
        await tx.query(`INSERT INTO "${schema}".business VALUES (2)`); // duplicate key: the transaction fails
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect(await business()).toEqual([]);
    expect((await store.list({ type: 'deferred.first.submit' })).items).toEqual([]);
    expect((await store.list({ type: 'deferred.first.business' })).items).toEqual([]);
    // Both orders commit together too, in one transaction each (callback-style queries included).
    await store.transaction(async (tx) => {
      await store.insert(tx, [command('deferred.commit')]);
      await new Promise<void>((resolve, reject) =>
        tx.query(`INSERT INTO "${schema}".business VALUES (3)`, (err) => (err ? reject(err) : resolve())),
      );
    });
    await store.transaction(async (tx) => {
      await tx.query(`INSERT INTO "${schema}".business VALUES (4)`);
      await store.insert(tx, [command('deferred.commit')]);
    });
    expect(await business()).toEqual([3, 4]);
    expect((await store.list({ type: 'deferred.commit' })).items).toHaveLength(2);
  });

  it('holds a submit back to the COMMIT once its id is known: a submit-only transaction is one round trip', async () => {
    await warmIdReserve();
    let statusInside: string | null = '';
    let syncs = 0;
    let bound: string[] = [];
    const ids = await store.transaction(async (tx) => {
      countSyncs(tx, () => (syncs += 1));
      bound = boundStatements(tx);
      const ids = await store.insert(tx, [command('held.only', { n: 1 })]);
      statusInside = tx.getTransactionStatus(); // nothing went out yet, not even BEGIN
      return ids;
    });
    restoreSyncs();
    expect(statusInside).toBe('I');
    expect(syncs).toBe(1); // one batch
    // The INSERT alone, an implicit transaction of its own: no BEGIN, no COMMIT.
    expect(bound).toHaveLength(1);
    expect(bound[0]).toMatch(/^asynccmd_/);
    expect(bound).not.toContain('asynccmd_begin_read_committed');
    const row = await store.get(ids[0]!);
    expect(row).toMatchObject({ id: ids[0], type: 'held.only', status: 'PENDING', payload: { n: 1 } });
    // A rolled-back transaction whose submit was still held sends nothing at all.
    await expect(
      store.transaction(async (tx) => {
        await store.insert(tx, [command('held.dropped')]);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect((await store.list({ type: 'held.dropped' })).items).toEqual([]);
  });

  it('sends a submit at once, with BEGIN in the same round trip, while no id is at hand', async () => {
    const fresh = await openStore(schema); // takes ids ahead only once asked for one
    try {
      let statusInside: string | null = '';
      let syncs = 0;
      const [id] = await fresh.transaction(async (tx) => {
        countSyncs(tx, () => (syncs += 1));
        const ids = await fresh.insert(tx, [command('unheld.first')]);
        statusInside = tx.getTransactionStatus(); // BEGIN and the INSERT went out together
        return ids;
      });
      restoreSyncs();
      expect(statusInside).toBe('T');
      expect(syncs).toBe(2); // BEGIN + INSERT, then COMMIT
      expect(await fresh.get(id!)).toMatchObject({ type: 'unheld.first', status: 'PENDING' });
    } finally {
      await fresh.close();
    }
  });

  it('sends a held submit ahead of the next statement, and reports its own failure, never a later one', async () => {
    await adminQuery(`CREATE TABLE IF NOT EXISTS "${schema}".held_business (id int PRIMARY KEY)`);
    await adminQuery(`CREATE OR REPLACE FUNCTION "${schema}".refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.type = 'held.boom' THEN RAISE EXCEPTION 'boom refused'; END IF; RETURN NEW; END $$`);
    await adminQuery(`CREATE OR REPLACE TRIGGER refuse_boom BEFORE INSERT ON "${schema}".async_command
      FOR EACH ROW EXECUTE FUNCTION "${schema}".refuse_boom()`);
    await warmIdReserve();
    // The transaction's next statement sees the held row: it went out just ahead of it.
    const seen = await store.transaction(async (tx) => {
      const [id] = await store.insert(tx, [command('held.visible')]);
      return (await tx.query(`SELECT id FROM ${store.table} WHERE id = $1`, [id])).rowCount;
    });
    expect(seen).toBe(1);
    // Failing ahead of a business statement: that statement rejects with the insert's error.
    await expect(
      store.transaction(async (tx) => {
        await store.insert(tx, [command('held.boom')]);
        await tx.query(`INSERT INTO "${schema}".held_business VALUES (1)`);
      }),
    ).rejects.toThrow('boom refused');
    // Failing in the COMMIT's batch: the commit rejects with it, business writes rolled back too.
    await expect(
      store.transaction(async (tx) => {
        await tx.query(`INSERT INTO "${schema}".held_business VALUES (2)`);
        await store.insert(tx, [command('held.boom')]);
      }),
    ).rejects.toThrow('boom refused');
    // A held submit behind an error the application caught: the transaction was already doomed.
    await expect(
      store.transaction(async (tx) => {
        await tx.query('SELECT 1/0').catch(() => undefined);
        await store.insert(tx, [command('held.doomed')]);
      }),
    ).rejects.toMatchObject({ code: 'TRANSACTION_ROLLED_BACK' });
    // Held submits alone go as one implicit transaction: the refused one takes the other with it.
    await expect(
      store.transaction(async (tx) => {
        await store.insert(tx, [command('held.partner')]);
        await store.insert(tx, [command('held.boom')]);
      }),
    ).rejects.toThrow('boom refused');
    expect(await adminQuery(`SELECT id FROM "${schema}".held_business`)).toEqual([]);
    expect((await store.list({ type: 'held.doomed' })).items).toEqual([]);
    expect((await store.list({ type: 'held.partner' })).items).toEqual([]);
    // The connections went back usable.
    for (let i = 0; i < 5; i++) {
      await expect(
        store.transaction((tx) => store.insert(tx, [command('held.after')])),
      ).resolves.toHaveLength(1);
    }
    await adminQuery(`DROP TRIGGER refuse_boom ON "${schema}".async_command`);
  });

  it("sends BEGIN and what is held in the same write and round trip as the caller's first statement", async () => {
    await adminQuery(`CREATE TABLE IF NOT EXISTS "${schema}".riding (id int PRIMARY KEY, note text)`);
    await warmIdReserve();
    const rows = async () =>
      (await adminQuery<{ id: number }>(`SELECT id FROM "${schema}".riding ORDER BY id`)).map((r) => r.id);
    // BEGIN rides with a statement with values: one Sync for both, and the transaction is open after it.
    let syncs = 0;
    let statusAfter: string | null = '';
    let returned: unknown[] = [];
    await store.transaction(async (tx) => {
      countSyncs(tx, () => (syncs += 1));
      const result = await tx.query<{ id: number; note: string }>(
        `INSERT INTO "${schema}".riding VALUES ($1, $2) RETURNING id, note`,
        [1, 'first'],
      );
      returned = result.rows;
      statusAfter = tx.getTransactionStatus();
      await tx.query(`INSERT INTO "${schema}".riding VALUES ($1, $2)`, [2, 'second']);
    });
    restoreSyncs();
    expect(returned).toEqual([{ id: 1, note: 'first' }]); // the caller's rows, parsed by pg as ever
    expect(statusAfter).toBe('T');
    expect(syncs).toBe(3); // BEGIN + first INSERT, the second INSERT, COMMIT
    expect(await rows()).toEqual([1, 2]);
    // A held submit rides too; the caller's failing statement rolls both back.
    await expect(
      store.transaction(async (tx) => {
        await store.insert(tx, [command('riding.rolled-back')]);
        await tx.query(`INSERT INTO "${schema}".riding VALUES ($1, $2)`, [1, 'duplicate']);
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect((await store.list({ type: 'riding.rolled-back' })).items).toEqual([]);
    // A held submit that fails ahead of it: the caller's statement never runs and reports that failure.
    await adminQuery(`CREATE OR REPLACE FUNCTION "${schema}".refuse_riding() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.type = 'riding.boom' THEN RAISE EXCEPTION 'riding refused'; END IF; RETURN NEW; END $$`);
    await adminQuery(`CREATE OR REPLACE TRIGGER refuse_riding BEFORE INSERT ON "${schema}".async_command
      FOR EACH ROW EXECUTE FUNCTION "${schema}".refuse_riding()`);
    try {
      await expect(
        store.transaction(async (tx) => {
          await store.insert(tx, [command('riding.boom')]);
          await tx.query(`INSERT INTO "${schema}".riding VALUES ($1, $2)`, [3, 'never']);
        }),
      ).rejects.toThrow('riding refused');
    } finally {
      await adminQuery(`DROP TRIGGER refuse_riding ON "${schema}".async_command`);
    }
    expect(await rows()).toEqual([1, 2]);
    // Callback style, and a statement pg sends by the simple protocol (no values): both still work.
    await store.transaction(async (tx) => {
      await new Promise<void>((resolve, reject) =>
        tx.query(`INSERT INTO "${schema}".riding VALUES ($1, $2)`, [4, 'callback'], (err) =>
          err ? reject(err) : resolve(),
        ),
      );
    });
    await store.transaction(async (tx) => {
      await tx.query(`INSERT INTO "${schema}".riding VALUES (5, 'simple')`);
    });
    expect(await rows()).toEqual([1, 2, 4, 5]);
    // The connections went back usable.
    for (let i = 0; i < 5; i++) {
      await store.transaction((tx) => tx.query(`SELECT id FROM "${schema}".riding WHERE id = $1`, [i]));
    }
  });

  it('takes ids ahead without handing one out twice, across stores and concurrent transactions', async () => {
    const other = await openStore(schema);
    try {
      const submitOne = (s: PostgresCommandStore) =>
        s.transaction((tx) => s.insert(tx, [command('held.unique')]));
      const ids = (
        await Promise.all(Array.from({ length: 300 }, (_, i) => submitOne(i % 2 ? store : other)))
      ).flat();
      expect(new Set(ids).size).toBe(300);
      expect((await store.list({ type: 'held.unique', limit: 1000 })).items.map((c) => c.id).sort()).toEqual(
        [...ids].sort(),
      );
    } finally {
      await other.close();
    }
  });

  it('sends nothing for a transaction that runs no statement, and hands its client back unchanged', async () => {
    const single = await openStore(schema, { poolConfig: { max: 1 } });
    try {
      await expect(single.transaction(() => Promise.resolve('nothing to do'))).resolves.toBe('nothing to do');
      await single.transaction((tx) => single.insert(tx, [command('deferred.single')]));
      const client = await single.pool.connect();
      try {
        expect(Object.prototype.hasOwnProperty.call(client, 'query')).toBe(false);
        expect(client.getTransactionStatus()).toBe('I');
      } finally {
        client.release();
      }
    } finally {
      await single.close();
    }
  });

  it('hands out each claimed command exactly as reading it back shows it, the values the claim wrote included', async () => {
    await store.transaction((tx) =>
      store.insert(tx, [
        command('claimed.rows', { n: 1 }, { bizKey: 'b-1', owner: 'billing', headers: { trace: 'x' } }),
        command('claimed.rows', { n: 2 }, { priority: 3, orderingKey: 'k' }),
      ]),
    );
    const claimed = await claimedAsReadBack('claimed.rows', { instance: 'worker-7', leaseMs: 45_000 });
    expect(claimed).toHaveLength(2);
    for (const c of claimed) {
      expect(c).toMatchObject({ claimedBy: 'worker-7' });
      expect(c.leaseUntil!.getTime() - c.startedAt!.getTime()).toBe(45_000);
    }
    await store.transaction((tx) => store.insert(tx, [command('claimed.anonymous')]));
    const unnamed = await claimedAsReadBack('claimed.anonymous', { leaseMs: 1_000 });
    expect(unnamed).toMatchObject([{ claimedBy: null }]);
    // Finished, so no later test finds them running.
    await store.complete([...claimed, ...unnamed].map((c) => ({ id: c.id, token: c.claimToken })));
  });

  it('hands out the commands of a type-limited claim exactly as reading them back shows them', async () => {
    // This claim runs in a transaction of its own, on pg's own query method and rows.
    await store.typeLimits!.declare([{ type: 'claimed.limited', maxRunning: 2 }]);
    await store.transaction((tx) =>
      store.insert(tx, [
        command('claimed.limited', { n: 1 }, { bizKey: 'l-1', headers: { trace: 'y' } }),
        command('claimed.limited', { n: 2 }, { orderingKey: 'lk' }),
        command('claimed.limited', { n: 3 }),
      ]),
    );
    const options = { limited: true, instance: 'worker-8', leaseMs: 30_000 };
    const claimed = await claimedAsReadBack('claimed.limited', options);
    expect(claimed).toHaveLength(2);
    await store.complete(claimed.map((c) => ({ id: c.id, token: c.claimToken })));
    const last = await claimedAsReadBack('claimed.limited', options);
    expect(last).toHaveLength(1);
    await store.complete(last.map((c) => ({ id: c.id, token: c.claimToken })));
  });

  it('keeps times exact to the millisecond', async () => {
    const runAt = new Date('2031-02-03T04:05:06.789Z');
    const [id] = await store.transaction((tx) => store.insert(tx, [command('times', {}, { runAt })]));
    const row = await store.get(id!);
    expect(row?.nextRunAt.toISOString()).toBe(runAt.toISOString());
    expect(row!.createdAt.getTime() % 1).toBe(0);
    const dbNow = await store.now();
    expect(Math.abs(dbNow.getTime() - Date.now())).toBeLessThan(5_000);
  });

  it('hands out ids beyond 2^53 as exact decimal text', async () => {
    const big = createPostgresStore({
      connectionString: 'postgres://postgres@127.0.0.1:5432/test',
      schema,
      table: 'big_ids',
      poolConfig: { max: 2 },
    });
    await big.migrate();
    try {
      await adminQuery(`ALTER TABLE "${schema}".big_ids ALTER COLUMN id RESTART WITH 9007199254740993`);
      const ids = await big.transaction((tx) => big.insert(tx, [command('big'), command('big')]));
      expect(ids).toEqual(['9007199254740993', '9007199254740994']);
      const claimed = await big.claimDue({
        types: ['big'],
        limit: 5,
        now: new Date(Date.now() + 1),
        token: 't',
        leaseMs: 1000,
      });
      expect(claimed.map((c) => c.id)).toEqual(ids);
      expect(await big.complete(claimed.map((c) => ({ id: c.id, token: 't' })))).toEqual(ids);
      expect((await big.get('9007199254740994'))?.status).toBe('SUCCESS');
      const page = await big.list({ limit: 1 });
      expect(page.items[0]?.id).toBe('9007199254740994');
      const next = await big.list({ limit: 1, cursor: page.nextCursor! });
      expect(next.items[0]?.id).toBe('9007199254740993');
    } finally {
      await big.close();
    }
  });

  it('claims due rows in (nextRunAt, id) order, honours limit and types, sets the lease on the DB clock', async () => {
    const base = Date.now() - 10_000;
    const ids = await store.transaction((tx) =>
      store.insert(tx, [
        command('order', { k: 'c' }, { runAt: new Date(base + 300) }),
        command('order', { k: 'a' }, { runAt: new Date(base + 100) }),
        command('order', { k: 'b' }, { runAt: new Date(base + 100) }),
        command('order', { k: 'future' }, { runAt: new Date(Date.now() + 60_000) }),
        command('other', { k: 'other' }, { runAt: new Date(base) }),
      ]),
    );
    const first = await claim(['order'], 2, 5_000);
    expect(first.map((c) => (c.payload as { k: string }).k)).toEqual(['a', 'b']);
    expect(first.map((c) => c.id)).toEqual([ids[1], ids[2]]);
    const dbNow = await store.now();
    for (const c of first) {
      expect(c.status).toBe('RUNNING');
      expect(c.leaseUntil!.getTime() - c.startedAt!.getTime()).toBe(5_000);
      expect(Math.abs(c.startedAt!.getTime() - dbNow.getTime())).toBeLessThan(2_000);
    }
    const rest = await claim(['order'], 10);
    expect(rest.map((c) => (c.payload as { k: string }).k)).toEqual(['c']);
    expect(await claim(['order'], 10)).toEqual([]);
    await store.complete([...first, ...rest].map((c) => ({ id: c.id, token: c.claimToken })));
  });

  it('never hands one row to two claimers (peer stores, each with its own pool)', async () => {
    const total = 600;
    const peers = await Promise.all(Array.from({ length: 4 }, () => openStore(schema)));
    try {
      await store.transaction((tx) =>
        store.insert(
          tx,
          Array.from({ length: total }, (_, i) => command('race', { i })),
        ),
      );
      const seen = new Map<string, number>();
      await Promise.all(
        peers.map(async (peer) => {
          for (;;) {
            const batch = await peer.claimDue({
              types: ['race'],
              limit: 7,
              now: new Date(Date.now() + 1),
              token: randomUUID(),
              leaseMs: 60_000,
            });
            if (batch.length === 0) return;
            for (const c of batch) seen.set(c.id, (seen.get(c.id) ?? 0) + 1);
            await peer.complete(batch.map((c) => ({ id: c.id, token: c.claimToken })));
          }
        }),
      );
      const doubles = [...seen.values()].filter((n) => n > 1).length;
      expect(doubles).toBe(0);
      expect(seen.size).toBe(total);
      const stats = await store.stats(new Date());
      expect(stats.counts.find((r) => r.type === 'race' && r.status === 'SUCCESS')?.count).toBe(total);
    } finally {
      await Promise.all(peers.map((p) => p.close()));
    }
  });

  it('fences complete, fail and heartbeat by the claim token, in batches', async () => {
    const ids = await store.transaction((tx) => store.insert(tx, [command('fence'), command('fence')]));
    const claimed = await claim(['fence']);
    expect(claimed.map((c) => c.id)).toEqual(ids);
    const [a, b] = claimed;
    const stale = { id: a!.id, token: 'not-the-token' };
    expect(await store.complete([stale])).toEqual([]);
    expect(await store.heartbeat([stale, { id: b!.id, token: b!.claimToken }], 60_000)).toEqual([
      { id: b!.id, token: b!.claimToken },
    ]);
    const outcome = decideFailure(a!, new Error('boom ☃'), new Date(), exponentialBackoff());
    expect(await store.fail([{ ref: stale, outcome }])).toEqual([]);
    expect(await store.fail([{ ref: { id: a!.id, token: a!.claimToken }, outcome }])).toEqual([a!.id]);
    const failed = await store.get(a!.id);
    expect(failed).toMatchObject({ status: 'PENDING', retryCount: 1, lastError: 'boom ☃', claimToken: null });
    expect(failed!.nextRunAt.getTime()).toBe(outcome.nextRunAt.getTime());
    expect(
      await store.complete([
        { id: b!.id, token: b!.claimToken },
        { id: a!.id, token: a!.claimToken },
      ]),
    ).toEqual([b!.id]);
    expect((await store.get(b!.id))!.finishedAt).not.toBeNull();
  });

  it('the history has every column of the command table, the list a move copies; a keyed command moves with its key', async () => {
    const columns = (table: string) =>
      adminQuery<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns
         WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`,
        [schema, table],
      ).then((rows) => rows.map((r) => r.column_name));
    expect(await columns('async_command')).toEqual([...COMMAND_TABLE_COLUMNS]);
    expect(await columns('async_command_history')).toEqual([...COMMAND_TABLE_COLUMNS]);
    // Nothing fires on a history insert: the keys are written by the command table's inserts.
    const triggers = await adminQuery(
      `SELECT tgname FROM pg_trigger WHERE tgrelid = '"${schema}".async_command_history'::regclass AND NOT tgisinternal`,
    );
    expect(triggers).toEqual([]);
    await store.keyLimits.declare([{ type: 'move.keyed', keyField: 'tenant', maxRunning: 5 }]);
    const [id] = await store.transaction((tx) =>
      store.insert(tx, [command('move.keyed', { tenant: 'acme' })]),
    );
    const [claimed] = await claim(['move.keyed']);
    expect(await store.complete([{ id: claimed!.id, token: claimed!.claimToken }])).toEqual([id]);
    const moved = await adminQuery<{ k: string }>(
      `SELECT flow_key AS k FROM "${schema}".async_command_history WHERE id = $1::bigint`,
      [id],
    );
    expect(moved).toEqual([{ k: 'acme' }]);
  });

  it('moves a succeeded command to the history table in the completing statement, one with dependants too; a schedule tick stays', async () => {
    const ids = await store.transaction((tx) =>
      store.insert(tx, [command('move'), command('move'), command('move'), command('move')]),
    );
    // Marked as a dependency submit marks it (it settles its dependants as it moves), and as a
    // schedule's tick (it completes in place: its once-per-tick key stays with the row).
    await adminQuery(`UPDATE "${schema}".async_command SET has_dependants = TRUE WHERE id = $1::bigint`, [
      ids[1],
    ]);
    await adminQuery(
      `UPDATE "${schema}".async_command SET schedule_name = 'move.tick', schedule_tick = now() WHERE id = $1::bigint`,
      [ids[2]],
    );
    const claimed = await claim(['move']);
    const before = await store.getMany(ids);
    const refs = claimed.map((c) => ({ id: c.id, token: c.claimToken }));
    expect(await store.complete(refs.slice(0, 3))).toEqual(ids.slice(0, 3));
    // The transactional completion (an executor's own transaction) moves it too.
    const own = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    try {
      const tx = await own.connect();
      await tx.query('BEGIN');
      expect(
        await store.transactionalCompletion.complete(tx, { id: refs[3]!.id, token: refs[3]!.token }),
      ).toBe(true);
      await tx.query('COMMIT');
      tx.release();
    } finally {
      await own.end();
    }
    const where = await adminQuery<{ id: string; place: string }>(
      `SELECT id::text AS id, 'command' AS place FROM "${schema}".async_command WHERE id = ANY($1::bigint[])
       UNION ALL
       SELECT id::text, 'history' FROM "${schema}".async_command_history WHERE id = ANY($1::bigint[])
       ORDER BY 1`,
      [ids],
    );
    expect(Object.fromEntries(where.map((r) => [r.id, r.place]))).toEqual({
      [ids[0]!]: 'history',
      [ids[1]!]: 'history',
      [ids[2]!]: 'command',
      [ids[3]!]: 'history',
    });
    // Read back, each is what it was with its SUCCESS written, wherever it lives.
    const after = await store.getMany(ids);
    const written = ['status', 'claimToken', 'leaseUntil', 'updatedAt', 'finishedAt', 'history'];
    const unchanged = (record: object): object =>
      Object.fromEntries(Object.entries(record).filter(([key]) => !written.includes(key)));
    expect(after.map(unchanged)).toEqual(before.map(unchanged));
    for (const record of after) {
      expect(record).toMatchObject({ status: 'SUCCESS', claimToken: null, leaseUntil: null });
      expect(record.updatedAt).toEqual(record.finishedAt);
      expect(record.history.map((a) => a.outcome)).toEqual(['succeeded']);
    }
    // A retried complete whose first try landed answers as landed, from the history too.
    expect(await store.complete(refs.slice(0, 2))).toEqual(ids.slice(0, 2));
  });

  it('reclaims expired leases on the database clock, leaves live ones, and kills past the rescue limit', async () => {
    const [hungId, liveId] = await store.transaction((tx) =>
      store.insert(tx, [command('hung'), command('live')]),
    );
    const [hung] = await claim(['hung'], 1, 1);
    const [live] = await claim(['live'], 1, 60_000);
    await untilDatabaseClockPasses(hung!.leaseUntil!);
    expect(hung?.id).toBe(hungId);
    expect(live?.id).toBe(liveId);
    const reclaimed = await store.reclaimHung({ limit: 100, maxRescues: 1 });
    expect(reclaimed).toEqual([{ id: hungId, type: 'hung', status: 'PENDING' }]);
    expect(await store.complete([{ id: hung!.id, token: hung!.claimToken }])).toEqual([]);
    const again = await claim(['hung'], 1, 1);
    expect(again[0]).toMatchObject({ id: hungId, rescueCount: 1 });
    await untilDatabaseClockPasses(again[0]!.leaseUntil!);
    expect(await store.reclaimHung({ limit: 100, maxRescues: 1 })).toEqual([
      { id: hungId, type: 'hung', status: 'DEAD' },
    ]);
    const dead = await store.get(hungId!);
    expect(dead).toMatchObject({ status: 'DEAD', rescueCount: 2, lastError: rescueLimitMessage(1) });
    expect(dead!.finishedAt).not.toBeNull();
    expect((await store.get(liveId!))?.status).toBe('RUNNING');
    await store.complete([{ id: live!.id, token: live!.claimToken }]);
  });

  it('submits idempotently: one row under concurrency, the key free again once finished', async () => {
    const peers = await Promise.all(Array.from({ length: 3 }, () => openStore(schema)));
    try {
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) => {
          const s = peers[i % peers.length]!;
          return s.transaction((tx) => s.insertIdempotent(tx, { ...command('idem'), bizKey: 'order-1' }));
        }),
      );
      expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
      expect(new Set(results.map((r) => r.id)).size).toBe(1);
      const plain = await store.transaction((tx) =>
        store.insert(tx, [command('idem', {}, { bizKey: 'order-1' })]),
      );
      expect(plain).toHaveLength(1);
      const [held] = await claim(['idem'], 1);
      expect(held?.id).toBe(results[0]!.id);
      await store.complete([{ id: held!.id, token: held!.claimToken }]);
      const fresh = await store.transaction((tx) =>
        store.insertIdempotent(tx, { ...command('idem'), bizKey: 'order-1' }),
      );
      expect(fresh.duplicate).toBe(false);
      expect(fresh.id).not.toBe(results[0]!.id);
    } finally {
      await Promise.all(peers.map((p) => p.close()));
    }
  });

  it('answers admin transitions with one guarded write, or a typed Left', async () => {
    const [id] = await store.transaction((tx) => store.insert(tx, [command('admin', {}, { maxRetry: 0 })]));
    const notFound = await store.retry('999999999999', new Date());
    expect(E.isLeft(notFound) && notFound.left.code).toBe('NOT_FOUND');
    const illegal = await store.retry(id!, new Date());
    expect(E.isLeft(illegal) && illegal.left.code).toBe('ILLEGAL_TRANSITION');
    const [c] = await claim(['admin']);
    await store.fail([
      {
        ref: { id: id!, token: c!.claimToken },
        outcome: decideFailure(c!, 'nope', new Date(), exponentialBackoff()),
      },
    ]);
    expect((await store.get(id!))?.status).toBe('DEAD');
    const retried = await store.retry(id!, new Date());
    expect(E.isRight(retried) && retried.right).toMatchObject({
      status: 'PENDING',
      retryCount: 1,
      retryCountAtRetry: 1,
      finishedAt: null,
    });
    const [c2] = await claim(['admin']);
    const requeued = await store.requeue(id!, new Date());
    expect(E.isRight(requeued) && requeued.right).toMatchObject({ status: 'PENDING', claimToken: null });
    expect(await store.complete([{ id: id!, token: c2!.claimToken }])).toEqual([]);
    const cancelled = await store.cancel(id!, 'customer changed their mind');
    expect(E.isRight(cancelled) && cancelled.right).toMatchObject({
      status: 'CANCELLED',
      lastError: 'customer changed their mind',
    });
    const refused = await store.kill(id!);
    expect(E.isLeft(refused) && refused.left.code).toBe('ILLEGAL_TRANSITION');
  });

  it('refuses an admin retry whose idempotency key another active command holds', async () => {
    const first = await store.transaction((tx) =>
      store.insertIdempotent(tx, { ...command('idem-retry', {}, { maxRetry: 0 }), bizKey: 'k' }),
    );
    const [c] = await claim(['idem-retry']);
    await store.fail([
      {
        ref: { id: first.id, token: c!.claimToken },
        outcome: decideFailure(c!, 'x', new Date(), exponentialBackoff()),
      },
    ]);
    const second = await store.transaction((tx) =>
      store.insertIdempotent(tx, { ...command('idem-retry'), bizKey: 'k' }),
    );
    expect(second.duplicate).toBe(false);
    const refused = await store.retry(first.id, new Date());
    expect(E.isLeft(refused) && refused.left).toMatchObject({
      code: 'IDEMPOTENCY_CONFLICT',
      holderId: second.id,
    });
    expect((await store.get(first.id))?.status).toBe('DEAD');
  });

  it('purges finished rows older than the cutoff in bounded batches, DEAD only when asked', async () => {
    const purgeStore = await openStore(schema, { table: 'purge_cmd' });
    try {
      const ids = await purgeStore.transaction((tx) =>
        purgeStore.insert(
          tx,
          Array.from({ length: 5 }, () => command('p', {}, { maxRetry: 0 })),
        ),
      );
      const claimed = await purgeStore.claimDue({
        types: ['p'],
        limit: 5,
        now: new Date(Date.now() + 1),
        token: 't',
        leaseMs: 1000,
      });
      await purgeStore.complete(claimed.slice(0, 4).map((c) => ({ id: c.id, token: 't' })));
      const last = claimed[4]!;
      await purgeStore.fail([
        {
          ref: { id: last.id, token: 't' },
          outcome: decideFailure(last, 'x', new Date(), exponentialBackoff()),
        },
      ]);
      const cutoff = new Date(Date.now() + 60_000);
      expect(await purgeStore.purge({ olderThan: new Date(Date.now() - 60_000), limit: 10 })).toBe(0);
      expect(await purgeStore.purge({ olderThan: cutoff, limit: 3 })).toBe(3);
      expect(await purgeStore.purge({ olderThan: cutoff, limit: 3 })).toBe(1);
      expect(await purgeStore.purge({ olderThan: cutoff, limit: 3 })).toBe(0);
      expect((await purgeStore.getMany(ids)).map((r) => r.status)).toEqual(['DEAD']);
      expect(await purgeStore.purge({ olderThan: cutoff, limit: 3, statuses: ['DEAD'] })).toBe(1);
    } finally {
      await purgeStore.close();
    }
  });

  /** 20,000 finished rows of `type`, analysed: the history an index has to keep a statement clear of. */
  async function addFinishedHistory(type: string): Promise<string> {
    const t = `"${schema}".async_command`;
    await adminQuery(
      `INSERT INTO ${t} (type, payload, status, max_retry, next_run_at, created_at, updated_at, finished_at)
       SELECT $1, '{}', 'SUCCESS', 0, now(), now(), now(), now() FROM generate_series(1, 20000)`,
      [type],
    );
    await adminQuery(`ANALYZE ${t}`);
    return t;
  }

  /** The plan of a statement, as text. */
  async function planOf(statement: string, values: unknown[] = []): Promise<string> {
    const plan = await adminQuery<{ 'QUERY PLAN': string }>(`EXPLAIN ${statement}`, values);
    return plan.map((p) => p['QUERY PLAN']).join('\n');
  }

  it('keeps claims on the partial claim index when many finished rows sit in the table', async () => {
    const t = await addFinishedHistory('work');
    const text = await planOf(
      `WITH due AS (
         SELECT id FROM ${t}
         WHERE status = 'PENDING' AND created_at IS NOT NULL AND next_run_at <= now() AND type = 'work'
         ORDER BY priority, next_run_at, id LIMIT 10 FOR UPDATE SKIP LOCKED)
       UPDATE ${t} AS c SET status = 'RUNNING' FROM due WHERE c.id = due.id RETURNING c.id`,
    );
    expect(text).toContain('async_command_claim_type_idx');
    expect(text).not.toContain('Seq Scan');
  });

  it('answers the health probe from the partial dead-letter and due indexes, whatever the history', async () => {
    await addFinishedHistory('probe');
    const sql = buildSql(tableNames(schema, 'async_command'));
    const text = await planOf(sql.healthProbe, [new Date().toISOString(), 100]);
    expect(text).toContain('async_command_dead_idx');
    expect(text).toContain('async_command_due_idx');
    expect(text).not.toContain('Seq Scan');
  });

  it('counts the outcomes of a range from the outcome index, whatever the history', async () => {
    await addFinishedHistory('outcomes');
    const sql = buildSql(tableNames(schema, 'async_command'));
    const from = new Date(Date.now() + 3_600_000);
    const text = await planOf(sql.outcomeCounts, [
      from.toISOString(),
      new Date(from.getTime() + 60_000).toISOString(),
      [10, 100, 1_000],
    ]);
    expect(text).toContain('async_command_outcome_idx');
    expect(text).not.toContain('Seq Scan');
  });

  it("lists newest first from each table's own index, and reads no history for statuses it cannot hold", async () => {
    const h = `"${schema}".async_command_history`;
    await adminQuery(
      `INSERT INTO ${h} (id, type, payload, status, max_retry, next_run_at, created_at, updated_at, finished_at)
       SELECT nextval(pg_get_serial_sequence('"${schema}".async_command', 'id')), 'listed', '{}', 'SUCCESS', 0,
              now(), now(), now(), now()
       FROM generate_series(1, 20000)`,
    );
    await adminQuery(`ANALYZE ${h}`);
    const sql = buildSql(tableNames(schema, 'async_command'));
    const list = (statuses: string[] | null) =>
      adminQuery<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ${sql.list}`, [
        statuses,
        null,
        null,
        null,
        null,
        51,
      ]).then((rows) => rows.map((r) => r['QUERY PLAN']).join('\n'));
    const all = await list(null);
    expect(all).toContain('async_command_created_at_idx');
    expect(all).toContain('async_command_h_created_idx');
    expect(all).not.toContain('Seq Scan');
    // PENDING only: the history is never scanned (folded away, or its scan never executed).
    const pending = await list(['PENDING']);
    const historyScans = pending.split('\n').filter((line) => line.includes('on async_command_history'));
    expect(historyScans.filter((line) => !line.includes('(never executed)'))).toEqual([]);
  });
});

describe('PostgresCommandStore on a pool the application owns', () => {
  it('runs on the given pool and never ends it', async () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
    const onPool = createPostgresStore({ pool, schema });
    const [id] = await onPool.transaction((tx) => onPool.insert(tx, [command('own-pool')]));
    expect((await onPool.get(id!))?.type).toBe('own-pool');
    await onPool.close();
    expect(pool.listenerCount('error')).toBe(0);
    expect((await pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    await pool.end();
  });

  it('runs its own sessions in READ COMMITTED with ISO dates whatever the connection options say', async () => {
    const own = createPostgresStore({
      connectionString: DATABASE_URL,
      poolConfig: { max: 1, options: '-c default_transaction_isolation=serializable -c DateStyle=SQL,DMY' },
      schema,
    });
    try {
      const rows = await own.pool.query<{ i: string; d: string }>(
        `SELECT current_setting('default_transaction_isolation') AS i, current_setting('DateStyle') AS d`,
      );
      expect(rows.rows[0]).toEqual({ i: 'read committed', d: 'ISO, DMY' });
      const runAt = new Date('2030-07-08T09:10:11.012Z');
      const [id] = await own.transaction((tx) => own.insert(tx, [command('iso', {}, { runAt })]));
      expect((await own.get(id!))?.nextRunAt.toISOString()).toBe(runAt.toISOString());
    } finally {
      await own.close();
    }
  });

  it('reads times exactly in any session time zone (offsets with minutes included)', async () => {
    const pool = new pg.Pool({
      connectionString: DATABASE_URL,
      max: 1,
      options: '-c TimeZone=Asia/Kathmandu',
    });
    const zoned = createPostgresStore({ pool, schema });
    try {
      const runAt = new Date('2029-12-31T23:59:59.999Z');
      const [id] = await zoned.transaction((tx) => zoned.insert(tx, [command('zone', {}, { runAt })]));
      const row = await zoned.get(id!);
      expect(row?.nextRunAt.toISOString()).toBe(runAt.toISOString());
      expect(Math.abs((await zoned.now()).getTime() - Date.now())).toBeLessThan(5_000);
      const [raw] = (await pool.query<{ t: string }>('SELECT now()::text AS t')).rows;
      expect(raw?.t).toMatch(/\+05:45$/);
    } finally {
      await zoned.close();
      await pool.end();
    }
  });
});

/**
 * Claims the due commands of `type` under a new token (within its stored type limit when `limited`)
 * and checks that each is RUNNING under that token, updated when it started, and equal to its
 * read-back.
 */
async function claimedAsReadBack(
  type: string,
  options: { readonly limited?: boolean; readonly instance?: string; readonly leaseMs: number },
): Promise<Awaited<ReturnType<PostgresCommandStore['claimDue']>>> {
  const token = randomUUID();
  const claimed = await store.claimDue({
    types: [type],
    ...(options.limited ? { limitedTypes: [type] } : {}),
    limit: 10,
    now: new Date(Date.now() + 1),
    token,
    leaseMs: options.leaseMs,
    ...(options.instance === undefined ? {} : { instance: options.instance }),
  });
  for (const c of claimed) {
    expect(c).toMatchObject({ status: 'RUNNING', claimToken: token, claimedBy: options.instance ?? null });
    expect(c.updatedAt).toEqual(c.startedAt);
    expect(c).toEqual(await store.get(c.id));
  }
  return claimed;
}
