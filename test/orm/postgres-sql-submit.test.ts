import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresStore } from '@asynccmd/adapter-postgres';
import type { PostgresCommandStore } from '@asynccmd/adapter-postgres';
import { createAsyncCommands, defineExecutor } from '@asynccmd/runtime';
import { readStats } from '@asynccmd/runtime/ops';
import pg from 'pg';
import { PG_URL, placeName } from './suite.js';

/**
 * The submit of SQL (`<table>_submit`, `<table>_submit_once`), called with raw SQL in a transaction
 * of a plain pg client, as a trigger, psql or a program in another language would.
 */
describe('PostgreSQL: submitting from SQL', () => {
  const schema = placeName('sql_submit');
  const submit = `"${schema}".async_command_submit`;
  const submitOnce = `"${schema}".async_command_submit_once`;
  const ran: string[] = [];
  const ship = defineExecutor<'sql.ship', { note: string }>({
    type: 'sql.ship',
    mode: 'IMMEDIATE',
    execute: (p) => void ran.push(p.note),
  });
  let store: PostgresCommandStore;
  let commands: ReturnType<typeof createAsyncCommands<readonly [typeof ship]>>;
  let db: pg.Client;

  beforeAll(async () => {
    store = createPostgresStore({
      connectionString: PG_URL,
      schema,
      poolConfig: { max: 4 },
      maxPayloadBytes: 1024,
    });
    await store.migrate();
    // A poll interval far past the test timeout: only the NOTIFY the function sends explains a run.
    commands = createAsyncCommands({ store, executors: [ship] as const, pollIntervalMs: 600_000 });
    commands.start();
    db = new pg.Client({ connectionString: PG_URL });
    await db.connect();
  });

  afterAll(async () => {
    await db?.end();
    await commands?.stop({ timeoutMs: 2_000 });
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  /** Runs `fn` in a transaction of `db`, committed when it resolves, rolled back when it throws. */
  async function inTransaction<T>(fn: () => Promise<T>): Promise<T> {
    await db.query('BEGIN');
    try {
      const result = await fn();
      await db.query('COMMIT');
      return result;
    } catch (e) {
      await db.query('ROLLBACK');
      throw e;
    }
  }

  async function waitFor(what: string, condition: () => boolean): Promise<void> {
    const until = Date.now() + 10_000;
    while (!condition()) {
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 2));
    }
  }

  const submitted = async (type: string, payload: unknown, named = ''): Promise<string> => {
    const { rows } = await db.query<{ id: string }>(`SELECT ${submit}($1, $2${named}) AS id`, [
      type,
      JSON.stringify(payload),
    ]);
    return rows[0]!.id;
  };

  it('commits with the transaction; a running runtime hears of it at once and runs it', async () => {
    const id = await inTransaction(() => submitted('sql.ship', { note: 'from sql' }));
    expect(id).toMatch(/^[1-9][0-9]*$/);
    await waitFor('the command to run', () => ran.includes('from sql'));
    expect(await store.get(id)).toMatchObject({
      id,
      type: 'sql.ship',
      payload: { note: 'from sql' },
      maxRetry: 5,
    });
  });

  it('rolls back with the transaction: nothing is stored, nothing runs', async () => {
    let id = '';
    await expect(
      inTransaction(async () => {
        id = await submitted('sql.ship', { note: 'rolled back' });
        throw new Error('business rule failed');
      }),
    ).rejects.toThrow('business rule failed');
    expect(id).not.toBe('');
    await inTransaction(() => submitted('sql.ship', { note: 'after the rollback' }));
    await waitFor('the later command to run', () => ran.includes('after the rollback'));
    await commands.scheduler.runRound();
    expect(ran).not.toContain('rolled back');
    expect(await store.get(id)).toBeNull();
  });

  it('submits from a trigger, in the transaction of the statement that fired it', async () => {
    await db.query(`CREATE TABLE "${schema}".orders (id serial PRIMARY KEY, status text NOT NULL)`);
    await db.query(`CREATE FUNCTION "${schema}".order_paid() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM ${submit}('sql.ship', json_build_object('note', 'paid ' || NEW.id));
        RETURN NEW;
      END $$`);
    await db.query(`CREATE TRIGGER order_paid AFTER INSERT ON "${schema}".orders
      FOR EACH ROW WHEN (NEW.status = 'PAID') EXECUTE FUNCTION "${schema}".order_paid()`);
    const { rows } = await db.query<{ id: number }>(
      `INSERT INTO "${schema}".orders (status) VALUES ('PAID') RETURNING id`,
    );
    await waitFor('the command to run', () => ran.includes(`paid ${rows[0]!.id}`));
    await expect(
      inTransaction(async () => {
        await db.query(`INSERT INTO "${schema}".orders (status) VALUES ('PAID')`);
        throw new Error('business rule failed');
      }),
    ).rejects.toThrow('business rule failed');
    await commands.scheduler.runRound();
    expect(ran.filter((n) => n.startsWith('paid '))).toEqual([`paid ${rows[0]!.id}`]);
  });

  it('takes run_at, biz_key, max_retry and owner by name; a delayed command waits', async () => {
    const runAt = new Date(Date.now() + 3_600_000);
    const { rows } = await db.query<{ id: string }>(
      `SELECT ${submit}('sql.ship', $1, run_at => $2, biz_key => 'order-7', max_retry => 2, owner => 'billing') AS id`,
      [JSON.stringify({ note: 'later' }), runAt.toISOString()],
    );
    expect(await store.get(rows[0]!.id)).toMatchObject({
      status: 'PENDING',
      bizKey: 'order-7',
      maxRetry: 2,
      owner: 'billing',
      nextRunAt: runAt,
    });
  });

  it('takes a priority by name or as the seventh argument; calls without one keep working at 0', async () => {
    const payload = JSON.stringify({ note: 'prio' });
    const named = await db.query<{ id: string }>(
      `SELECT ${submit}('sql.prioritised', $1, priority => -4) AS id`,
      [payload],
    );
    const positional = await db.query<{ id: string }>(
      `SELECT ${submit}('sql.prioritised', $1, NULL, NULL, 5, NULL, 9) AS id`,
      [payload],
    );
    const sixArguments = await db.query<{ id: string }>(
      `SELECT ${submit}('sql.prioritised', $1, NULL, NULL, 5, NULL) AS id`,
      [payload],
    );
    const once = await db.query<{ id: string }>(
      `SELECT id FROM ${submitOnce}('sql.prioritised', $1, biz_key => 'prio-once', priority => 2)`,
      [payload],
    );
    const priorityOf = async (id: string | undefined) => (await store.get(id!))?.priority;
    expect(await priorityOf(named.rows[0]?.id)).toBe(-4);
    expect(await priorityOf(positional.rows[0]?.id)).toBe(9);
    expect(await priorityOf(sixArguments.rows[0]?.id)).toBe(0);
    expect(await priorityOf(once.rows[0]?.id)).toBe(2);
    // One function of each name: migration 8 replaced those of migration 6 instead of adding beside them.
    const functions = await db.query<{ proname: string; n: string }>(
      `SELECT proname, count(*)::text AS n FROM pg_proc WHERE pronamespace = $1::regnamespace
         AND proname IN ('async_command_submit', 'async_command_submit_once') GROUP BY proname ORDER BY proname`,
      [schema],
    );
    expect(functions.rows).toEqual([
      { proname: 'async_command_submit', n: '1' },
      { proname: 'async_command_submit_once', n: '1' },
    ]);
  });

  it('stores an unknown type as another service would: PENDING, counted, not run here', async () => {
    const id = await inTransaction(() => submitted('sql.elsewhere', { note: 'not mine' }));
    await commands.scheduler.runRound();
    expect((await store.get(id))?.status).toBe('PENDING');
    expect((await readStats(store)).byType['sql.elsewhere']).toMatchObject({ PENDING: 1 });
  });

  it('refuses bad input with a stable SQLSTATE and message prefix, writing nothing', async () => {
    const refusals: [string, unknown[], string, string][] = [
      [`SELECT ${submit}($1, '{}')`, [''], '22023', 'asynccmd: INVALID_ARGUMENT: a command needs a type'],
      [`SELECT ${submit}($1, '{}')`, [null], '22023', 'asynccmd: INVALID_ARGUMENT: a command needs a type'],
      [
        `SELECT ${submit}('sql.ship', $1)`,
        [null],
        '22023',
        'asynccmd: INVALID_ARGUMENT: a command needs a payload',
      ],
      [
        `SELECT ${submit}('sql.ship', $1)`,
        [JSON.stringify({ note: 'x'.repeat(2048) })],
        '54000',
        'asynccmd: PAYLOAD_TOO_LARGE: payload is 2059 bytes as JSON, over the limit of 1024 bytes',
      ],
      [
        `SELECT ${submit}('sql.ship', $1)`,
        ['['.repeat(65) + ']'.repeat(65)],
        '22023',
        'asynccmd: PAYLOAD_NOT_SERIALISABLE: payload is nested deeper than 64 levels',
      ],
      [
        `SELECT ${submit}('sql.ship', '{}', run_at => $1)`,
        ['0999-12-31T23:59:59Z'],
        '22023',
        'asynccmd: INVALID_ARGUMENT: run_at must be from',
      ],
      [
        `SELECT ${submit}('sql.ship', '{}', run_at => $1)`,
        ['infinity'],
        '22023',
        'asynccmd: INVALID_ARGUMENT: run_at must be from',
      ],
      [
        `SELECT ${submit}('sql.ship', '{}', max_retry => $1)`,
        [-1],
        '22023',
        'asynccmd: INVALID_ARGUMENT: max_retry must be',
      ],
      [
        `SELECT ${submit}('sql.ship', '{}', max_retry => $1)`,
        [1001],
        '22023',
        'asynccmd: INVALID_ARGUMENT: max_retry must be',
      ],
      [
        `SELECT ${submit}('sql.ship', '{}', biz_key => $1)`,
        [''],
        '22023',
        'asynccmd: INVALID_ARGUMENT: biz_key must be',
      ],
      [
        `SELECT ${submit}('sql.ship', '{}', biz_key => $1)`,
        ['k'.repeat(129)],
        '22023',
        'asynccmd: INVALID_ARGUMENT: biz_key must be',
      ],
      [
        `SELECT ${submit}('sql.ship', '{}', owner => $1)`,
        ['o'.repeat(65)],
        '22023',
        'asynccmd: INVALID_ARGUMENT: owner must be',
      ],
      [
        `SELECT ${submit}('sql.ship', '{}', priority => $1)`,
        [32768],
        '22023',
        'asynccmd: INVALID_ARGUMENT: priority must be an integer from -32768 to 32767, not 32768',
      ],
      [
        `SELECT * FROM ${submitOnce}('sql.ship', '{}', biz_key => 'p', priority => $1)`,
        [null],
        '22023',
        'asynccmd: INVALID_ARGUMENT: priority must be',
      ],
      [
        `SELECT * FROM ${submitOnce}('sql.ship', '{}')`,
        [],
        '22023',
        'asynccmd: INVALID_ARGUMENT: an idempotent submit needs',
      ],
    ];
    const before = (await store.list({ limit: 1000 })).items.length;
    for (const [text, values, sqlstate, message] of refusals) {
      const error = await db.query(text, values).then(
        () => null,
        (e: unknown) => e as { code?: string; message?: string },
      );
      expect({ text, values, code: error?.code }).toEqual({ text, values, code: sqlstate });
      expect(error?.message?.startsWith(message), `${error?.message} starts with ${message}`).toBe(true);
    }
    expect((await store.list({ limit: 1000 })).items.length).toBe(before);
  });

  it('accepts what the client accepts at the limits: 64 levels, brackets inside strings, the years 1000 and 9999', async () => {
    const times = ['1000-01-01T00:00:00.000Z', '9999-12-31T23:59:59.999Z'];
    const [deep, brackets, nullPayload, ...timed] = await inTransaction(async () => [
      await submitted('sql.elsewhere', JSON.parse('['.repeat(64) + ']'.repeat(64))),
      await submitted('sql.elsewhere', { text: '['.repeat(100) + '\\"{'.repeat(50) }),
      await submitted('sql.elsewhere', null),
      ...(await Promise.all(
        times.map(async (runAt) => {
          const { rows } = await db.query<{ id: string }>(
            `SELECT ${submit}('sql.elsewhere', '1', run_at => $1) AS id`,
            [runAt],
          );
          return rows[0]!.id;
        }),
      )),
    ]);
    expect((await store.get(deep!))?.payload).toEqual(JSON.parse('['.repeat(64) + ']'.repeat(64)));
    expect((await store.get(brackets!))?.payload).toEqual({ text: '['.repeat(100) + '\\"{'.repeat(50) });
    // JSON null is a payload (SQL NULL is not).
    expect((await store.get(nullPayload!))?.payload).toBeNull();
    for (const [i, id] of timed.entries()) {
      expect((await store.get(id))?.nextRunAt.toISOString()).toBe(times[i]);
    }
  });

  it('the idempotent submit hands back the unfinished holder on a duplicate, as the store does', async () => {
    const once = async (
      type: string,
      key: string,
      note: string,
    ): Promise<{ id: string; duplicate: boolean }> => {
      const { rows } = await db.query<{ id: string; duplicate: boolean }>(
        `SELECT id::text, duplicate FROM ${submitOnce}($1, $2, biz_key => $3)`,
        [type, JSON.stringify({ note }), key],
      );
      return rows[0]!;
    };
    const [first, second] = await inTransaction(async () => [
      await once('sql.elsewhere', 'once-1', 'first'),
      await once('sql.elsewhere', 'once-1', 'second'),
    ]);
    expect(first).toEqual({ id: expect.stringMatching(/^[1-9][0-9]*$/), duplicate: false });
    expect(second).toEqual({ id: first!.id, duplicate: true });
    const viaStore = await store.transaction((tx) =>
      store.insertIdempotent(tx, { type: 'sql.elsewhere', bizKey: 'once-1', payloadJson: '{}', maxRetry: 1 }),
    );
    expect(viaStore).toEqual({ id: first!.id, duplicate: true, replaced: false });
    // Finished, the key is free again: a new command takes it.
    await store.cancel(first!.id, 'done with it');
    const third = await inTransaction(() => once('sql.elsewhere', 'once-1', 'third'));
    expect(third.duplicate).toBe(false);
    expect(third.id).not.toBe(first!.id);

    // Of a type this runtime runs: the one command runs, once.
    await inTransaction(async () => {
      await once('sql.ship', 'once-2', 'once');
      await once('sql.ship', 'once-2', 'twice');
    });
    await waitFor('the command to run', () => ran.includes('once'));
    await commands.scheduler.runRound();
    expect(ran.filter((n) => n === 'once' || n === 'twice')).toEqual(['once']);
  });

  it('an idempotent submit on another connection, racing the holder’s commit, hands back the holder’s id', async () => {
    const other = new pg.Client({ connectionString: PG_URL });
    await other.connect();
    try {
      const once = (client: pg.Client) =>
        client.query<{ id: string; duplicate: boolean }>(
          `SELECT id::text, duplicate FROM ${submitOnce}('sql.elsewhere', '{}', biz_key => 'race-1')`,
        );
      await db.query('BEGIN');
      const holder = (await once(db)).rows[0]!;
      const racing = once(other);
      await db.query('COMMIT');
      expect(holder.duplicate).toBe(false);
      expect((await racing).rows).toEqual([{ id: holder.id, duplicate: true }]);
    } finally {
      await other.end();
    }
  });

  it('migrating again, and from several processes at once, keeps the functions and sets the payload limit', async () => {
    const fresh = placeName('sql_submit_mig');
    const peers = [0, 1, 2].map(() =>
      createPostgresStore({
        connectionString: PG_URL,
        schema: fresh,
        poolConfig: { max: 2 },
        maxPayloadBytes: 2048,
      }),
    );
    try {
      await Promise.all(peers.map((p) => p.migrate()));
      await Promise.all(peers.map((p) => p.migrate()));
      const { rows } = await db.query<{ bytes: number }>(
        `SELECT "${fresh}".async_command_payload_limit() AS bytes`,
      );
      expect(rows).toEqual([{ bytes: 2048 }]);
      const id = await db.query<{ id: string }>(`SELECT "${fresh}".async_command_submit('t', $1) AS id`, [
        JSON.stringify({ note: 'x'.repeat(1500) }),
      ]);
      expect(await peers[0]!.get(id.rows[0]!.id)).toMatchObject({ type: 't' });
    } finally {
      await Promise.all(peers.map((p) => p.close()));
      await db.query(`DROP SCHEMA IF EXISTS "${fresh}" CASCADE`);
    }
  });
});
