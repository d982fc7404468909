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
    await commands.runRound();
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
    await commands.runRound();
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
    await commands.runRound();
    expect((await store.get(id))?.status).toBe('PENDING');
    expect((await readStats(store)).byType['sql.elsewhere']).toMatchObject({ PENDING: 1 });
  });

  it("keys a keyed type's command as the store's inserts do, from submit, submit_once and its replace", async () => {
    await store.keyLimits.declare([{ type: 'sql.keyed', keyField: 'tenant', maxRunning: 1 }]);
    const keyOf = async (id: string): Promise<string | null> =>
      (
        await db.query<{ k: string | null }>(
          `SELECT flow_key AS k FROM "${schema}".async_command WHERE id = $1`,
          [id],
        )
      ).rows[0]!.k;
    expect(await keyOf(await submitted('sql.keyed', { tenant: 'acme' }))).toBe('acme');
    expect(await keyOf(await submitted('sql.keyed', { other: 1 }))).toBe('');
    expect(await keyOf(await submitted('sql.elsewhere', { tenant: 'acme' }))).toBeNull();
    const once = async (tenant: string, onPending: string) =>
      (
        await db.query<{ id: string }>(
          `SELECT id::text AS id FROM ${submitOnce}('sql.keyed', $1, biz_key => 'k1', on_pending => $2)`,
          [JSON.stringify({ tenant }), onPending],
        )
      ).rows[0]!.id;
    const id = await once('first', 'keep');
    expect(await keyOf(id)).toBe('first');
    expect(await once('second', 'replace')).toBe(id);
    expect(await keyOf(id)).toBe('second');
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
      ...['overwrite', 'Replace', '', null].map((onPending): [string, unknown[], string, string] => [
        `SELECT * FROM ${submitOnce}('sql.ship', '{}', biz_key => 'bad-on-pending', on_pending => $1)`,
        [onPending],
        '22023',
        `asynccmd: INVALID_ARGUMENT: on_pending must be 'keep', 'replace' or 'replace-keep-run-at', not ${onPending === null ? 'null' : `'${onPending}'`}`,
      ]),
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
    await commands.runRound();
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

  interface Once {
    id: string;
    duplicate: boolean;
    replaced: boolean;
  }
  /** submit_once of `payload` under `key`, the named arguments after it (`named`) as SQL text. */
  const onceOn = async (
    client: pg.Client,
    type: string,
    key: string,
    payload: unknown,
    named = '',
    values: unknown[] = [],
  ): Promise<Once> => {
    const { rows } = await client.query<Once>(
      `SELECT id::text, duplicate, replaced FROM ${submitOnce}($1, $2, biz_key => $3${named})`,
      [type, JSON.stringify(payload), key, ...values],
    );
    return rows[0]!;
  };

  /** Resolves once the backend of `client` waits for a lock another transaction holds. */
  async function blocked(client: pg.Client): Promise<void> {
    const pid = (client as unknown as { processID: number }).processID;
    const until = Date.now() + 10_000;
    for (;;) {
      const { rows } = await db.query<{ waiting: boolean }>(
        `SELECT wait_event_type = 'Lock' AS waiting FROM pg_stat_activity WHERE pid = $1`,
        [pid],
      );
      if (rows[0]?.waiting === true) return;
      if (Date.now() > until) throw new Error(`backend ${pid} never waited for a lock`);
      await new Promise((r) => setTimeout(r, 2));
    }
  }

  it("on_pending 'replace' gives a PENDING holder the call's payload, priority, max_retry and due time; 'replace-keep-run-at' all but the due time", async () => {
    const type = 'sql.replaced';
    const firstRunAt = new Date(Date.now() + 60_000);
    const held = await store.transaction((tx) =>
      store.insertIdempotent(tx, {
        type,
        bizKey: 'debounced',
        payloadJson: '{"v":1}',
        maxRetry: 1,
        priority: 5,
        runAt: firstRunAt,
        owner: 'first-owner',
        headers: { h: 'one' },
      }),
    );
    const before = await store.get(held.id);
    const nextRunAt = new Date(Date.now() + 120_000);
    expect(
      await onceOn(
        db,
        type,
        'debounced',
        { v: 2 },
        `, run_at => $4, max_retry => 7, priority => -3, owner => 'next-owner', on_pending => 'replace'`,
        [nextRunAt.toISOString()],
      ),
    ).toEqual({ id: held.id, duplicate: true, replaced: true });
    const replaced = await store.get(held.id);
    expect(replaced).toMatchObject({
      status: 'PENDING',
      payload: { v: 2 },
      // The SQL submit takes no headers: the replaced command carries this submit's, none.
      headers: {},
      priority: -3,
      maxRetry: 7,
      retryCount: 0,
      idempotent: true,
      // Who submitted it first stays on the row, as with the store's replace.
      owner: 'first-owner',
      nextRunAt,
      createdAt: before!.createdAt,
    });

    const later = new Date(Date.now() + 86_400_000);
    expect(
      await onceOn(db, type, 'debounced', { v: 3 }, `, run_at => $4, on_pending => 'replace-keep-run-at'`, [
        later.toISOString(),
      ]),
    ).toEqual({ id: held.id, duplicate: true, replaced: true });
    // The arguments left out replace with their defaults, as a new command would get them.
    expect(await store.get(held.id)).toMatchObject({
      payload: { v: 3 },
      priority: 0,
      maxRetry: 5,
      nextRunAt,
    });

    // 'keep', named or left out, leaves the holder as it is.
    const kept = await store.get(held.id);
    for (const named of [`, on_pending => 'keep'`, '']) {
      expect(await onceOn(db, type, 'debounced', { v: 4 }, named)).toEqual({
        id: held.id,
        duplicate: true,
        replaced: false,
      });
    }
    expect(await store.get(held.id)).toEqual(kept);

    // With no unfinished command of the key, a replacing call inserts as usual.
    const fresh = await onceOn(db, type, 'fresh', { v: 1 }, `, on_pending => 'replace'`);
    expect(fresh).toEqual({ id: expect.stringMatching(/^[1-9][0-9]*$/), duplicate: false, replaced: false });
    expect(await store.get(fresh.id)).toMatchObject({ idempotent: true, bizKey: 'fresh', payload: { v: 1 } });
    expect((await store.list({ type })).items).toHaveLength(2);
  });

  it('a holder replaced to be due now is announced at COMMIT: the running runtime runs it, with the new payload', async () => {
    const key = 'debounce-due';
    const held = await onceOn(
      db,
      'sql.ship',
      key,
      { note: 'not yet' },
      `, run_at => now() + interval '1 hour'`,
    );
    const replaced = await inTransaction(() =>
      onceOn(db, 'sql.ship', key, { note: 'replaced, due now' }, `, on_pending => 'replace'`),
    );
    expect(replaced).toEqual({ id: held.id, duplicate: true, replaced: true });
    await waitFor('the replaced command to run', () => ran.includes('replaced, due now'));
    expect(ran).not.toContain('not yet');
  });

  it.each([['replace'], ['replace-keep-run-at']])(
    "a RUNNING holder is never changed by on_pending '%s': the answer says replaced false",
    async (onPending) => {
      const type = `sql.running.${onPending}`;
      const held = await onceOn(db, type, 'busy', { v: 1 });
      const [running] = await store.claimDue({
        types: [type],
        limit: 1,
        now: new Date(Date.now() + 1_000),
        token: `token-${onPending}`,
        leaseMs: 60_000,
      });
      expect(running?.id).toBe(held.id);
      expect(
        await onceOn(
          db,
          type,
          'busy',
          { v: 2 },
          `, run_at => now() + interval '1 hour', priority => 9, max_retry => 0, on_pending => $4`,
          [onPending],
        ),
      ).toEqual({ id: held.id, duplicate: true, replaced: false });
      expect(await store.get(held.id)).toMatchObject({
        status: 'RUNNING',
        payload: { v: 1 },
        priority: 0,
        maxRetry: 5,
        claimToken: running!.claimToken,
        nextRunAt: running!.nextRunAt,
      });
    },
  );

  it('a replacing call that meets a holder a claim is taking waits for it, then leaves it alone', async () => {
    const type = 'sql.claim-race';
    const held = await onceOn(db, type, 'claimed', { v: 1 });
    const other = new pg.Client({ connectionString: PG_URL });
    await other.connect();
    try {
      // The claim's write, held open in a transaction: what a claimer does to the row.
      await db.query('BEGIN');
      await db.query(
        `UPDATE "${schema}".async_command SET status = 'RUNNING', claim_token = 'by-hand',
           lease_until = now() + interval '1 minute', started_at = now() WHERE id = $1`,
        [held.id],
      );
      const replacing = onceOn(other, type, 'claimed', { v: 2 }, `, on_pending => 'replace'`);
      await blocked(other);
      await db.query('COMMIT');
      expect(await replacing).toEqual({ id: held.id, duplicate: true, replaced: false });
      expect(await store.get(held.id)).toMatchObject({ status: 'RUNNING', payload: { v: 1 } });
    } finally {
      await other.end();
    }
  });

  it('two replacing calls on two connections both succeed: one inserts and the other replaces it, or both replace', async () => {
    const type = 'sql.replace-race';
    const other = new pg.Client({ connectionString: PG_URL });
    await other.connect();
    try {
      /**
       * A replacing call in an open transaction of `db`, then one on `other` that waits for it, then
       * `end` of the first: both answers.
       */
      const race = async (
        key: string,
        by: [string, string],
        secondMode: string,
        end: 'COMMIT' | 'ROLLBACK',
      ) => {
        await db.query('BEGIN');
        const first = await onceOn(db, type, key, { by: by[0] }, `, on_pending => 'replace'`);
        const second = onceOn(other, type, key, { by: by[1] }, `, on_pending => $4`, [secondMode]);
        await blocked(other);
        await db.query(end);
        return [first, await second] as const;
      };
      // No holder: the second call waits for the first's insert, then replaces what it committed.
      const [first, second] = await race('race', ['first', 'second'], 'replace', 'COMMIT');
      expect(first).toMatchObject({ duplicate: false, replaced: false });
      expect(second).toEqual({ id: first.id, duplicate: true, replaced: true });
      expect((await store.get(first.id))?.payload).toEqual({ by: 'second' });

      // A holder: the second waits for the first's replace, then replaces in turn; the last write stays.
      const [third, fourth] = await race('race', ['third', 'fourth'], 'replace-keep-run-at', 'COMMIT');
      expect(third).toEqual({ id: first.id, duplicate: true, replaced: true });
      expect(fourth).toEqual({ id: first.id, duplicate: true, replaced: true });
      expect((await store.get(first.id))?.payload).toEqual({ by: 'fourth' });

      // The first inserter rolls back: the waiting call inserts instead.
      const [undone, inserted] = await race('undone', ['rolled back', 'after'], 'replace', 'ROLLBACK');
      expect(undone.duplicate).toBe(false);
      expect(inserted).toMatchObject({ duplicate: false, replaced: false });
      expect(inserted.id).not.toBe(undone.id);
      expect((await store.get(inserted.id))?.payload).toEqual({ by: 'after' });

      // Many at once from four connections, each call after the one before on its connection: one
      // command, one insert, every other call a replace.
      const more = [new pg.Client({ connectionString: PG_URL }), new pg.Client({ connectionString: PG_URL })];
      await Promise.all(more.map((c) => c.connect()));
      const results = (
        await Promise.all(
          [db, other, ...more].map(async (client, c) => {
            const mine: Once[] = [];
            for (let i = 0; i < 6; i++) {
              mine.push(await onceOn(client, type, 'burst', { c, i }, `, on_pending => 'replace'`));
            }
            return mine;
          }),
        ).finally(() => Promise.all(more.map((c) => c.end())))
      ).flat();
      expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
      expect(results.filter((r) => r.duplicate).every((r) => r.replaced)).toBe(true);
      expect(new Set(results.map((r) => r.id)).size).toBe(1);
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

  describe('a database at version 11 (submit_once without on_pending) migrated to 12', () => {
    /** A schema holding what versions 1 to 11 made, as a store of version 11 left it, and a store on it. */
    async function atVersion11(name: string): Promise<PostgresCommandStore> {
      const unmigrated = createPostgresStore({
        connectionString: PG_URL,
        schema: name,
        poolConfig: { max: 2 },
      });
      const script = await unmigrated.migrationScript({ all: true });
      await db.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
      await inTransaction(async () => {
        for (const statement of script.setup) await db.query(statement);
        for (const version of script.versions.filter((v) => v.version <= 11)) {
          for (const statement of version.statements) await db.query(statement);
        }
      });
      return unmigrated;
    }
    const versionsOf = async (name: string): Promise<number[]> =>
      (
        await db.query<{ version: number }>(
          `SELECT version FROM "${name}".async_command_migrations ORDER BY version`,
        )
      ).rows.map((r) => r.version);
    const submitOnceFunctions = async (name: string): Promise<string[]> =>
      (
        await db.query<{ args: string }>(
          `SELECT pg_get_function_arguments(oid) AS args FROM pg_proc
             WHERE pronamespace = $1::regnamespace AND proname = 'async_command_submit_once'`,
          [name],
        )
      ).rows.map((r) => r.args);

    it.each([['migrate()'], ['the script of migrate --print-sql']])(
      'by %s: one submit_once with on_pending, and calls written for version 11 keep working',
      async (how) => {
        const name = placeName(how === 'migrate()' ? 'sql_submit_v11' : 'sql_submit_v11_sql');
        const v11 = await atVersion11(name);
        const fn = `"${name}".async_command_submit_once`;
        try {
          expect(await versionsOf(name)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
          // A caller of version 11 in PL/pgSQL, reading the two columns into two variables.
          await db.query(`CREATE FUNCTION "${name}".order_once(k text) RETURNS text LANGUAGE plpgsql AS $$
            DECLARE i bigint; d boolean;
            BEGIN
              SELECT * INTO i, d FROM ${fn}('sql.v11', '{"v":1}', biz_key => k);
              RETURN i || ' ' || d;
            END $$`);
          const before = await db.query(`SELECT * FROM ${fn}('sql.v11', '{"v":0}', biz_key => 'held')`);
          expect(before.fields.map((f) => f.name)).toEqual(['id', 'duplicate']);
          const heldId = String((before.rows[0] as { id: string }).id);

          if (how === 'migrate()') {
            await v11.migrate();
          } else {
            const script = await v11.migrationScript();
            expect(script.versions.map((v) => [v.version, v.name])).toEqual([
              [12, 'replacing submit from SQL'],
              [13, 'paused types'],
              [14, 'executor results'],
              [15, 'rate limits'],
              [16, 'key limits'],
              [17, 'key rate limits'],
              [18, 'dependencies and workflows'],
              [19, 'progress, and the workflow of a command'],
              [20, 'flow keys'],
              [21, 'finished commands leave the command table'],
              [22, 'dependants settled by the completing statement'],
              [23, 'claims past a slow head'],
              [24, 'creation index without the id'],
              [25, 'history in time partitions'],
              [26, 'submit windows'],
              [27, 'key weights'],
              [28, 'claims per type'],
            ]);
            await inTransaction(async () => {
              for (const version of script.versions)
                for (const statement of version.statements) await db.query(statement);
            });
            expect((await v11.migrationScript()).versions).toEqual([]);
            await v11.migrate();
          }
          expect(await versionsOf(name)).toEqual([
            1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
            28,
          ]);
          // Replaced, not added beside the function of version 8.
          const functions = await submitOnceFunctions(name);
          expect(functions).toHaveLength(1);
          expect(functions[0]).toMatch(
            /, ordering_key text DEFAULT NULL::text, on_pending text DEFAULT 'keep'::text, OUT id bigint, OUT duplicate boolean, OUT replaced boolean$/,
          );

          // The holder of version 11 is replaced by the new call; the calls of version 11 keep the holder.
          const replacing = await db.query<Once>(
            `SELECT id::text, duplicate, replaced FROM ${fn}('sql.v11', '{"v":2}', biz_key => 'held', on_pending => 'replace')`,
          );
          expect(replacing.rows).toEqual([{ id: heldId, duplicate: true, replaced: true }]);
          expect((await v11.get(heldId))?.payload).toEqual({ v: 2 });
          const named = await db.query<{ id: string; duplicate: boolean }>(
            `SELECT id::text, duplicate FROM ${fn}('sql.v11', '{"v":3}', biz_key => 'held')`,
          );
          expect(named.rows).toEqual([{ id: heldId, duplicate: true }]);
          const positional = await db.query(
            `SELECT * FROM ${fn}('sql.v11', '{"v":3}', NULL, 'held', 5, NULL, 0, NULL)`,
          );
          // SELECT * now has the third column.
          expect(positional.fields.map((f) => f.name)).toEqual(['id', 'duplicate', 'replaced']);
          expect(positional.rows).toEqual([{ id: heldId, duplicate: true, replaced: false }]);
          // The PL/pgSQL caller gets its two columns (the third is left over, unread).
          const first = await db.query<{ r: string }>(`SELECT "${name}".order_once('fresh') AS r`);
          expect(first.rows[0]?.r).toMatch(/^[1-9][0-9]* false$/);
          expect(
            (await db.query<{ r: string }>(`SELECT "${name}".order_once('fresh') AS r`)).rows[0]?.r,
          ).toBe(first.rows[0]!.r.replace('false', 'true'));
          expect((await v11.get(heldId))?.payload).toEqual({ v: 2 });
        } finally {
          await v11.close();
          await db.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
        }
      },
    );

    it('a SQL function that depends on the function of version 8 stops the migration, which changes nothing', async () => {
      const name = placeName('sql_submit_v11_dep');
      const v11 = await atVersion11(name);
      try {
        // BEGIN ATOMIC records its dependency on submit_once, so migration 12 cannot drop it.
        await db.query(`CREATE FUNCTION "${name}".ship_once(k text) RETURNS bigint LANGUAGE sql
          BEGIN ATOMIC SELECT id FROM "${name}".async_command_submit_once('sql.v11', '{}', biz_key => k); END`);
        const error = await v11.migrate().then(
          () => null,
          (e: unknown) => e as { code?: string; message?: string },
        );
        expect(error?.code).toBe('2BP01'); // dependent_objects_still_exist
        expect(await versionsOf(name)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        expect(await submitOnceFunctions(name)).toEqual([
          expect.stringMatching(
            /ordering_key text DEFAULT NULL::text, OUT id bigint, OUT duplicate boolean$/,
          ),
        ]);
        // Dropped first (and created again after), the dependent lets migration 12 through.
        await db.query(`DROP FUNCTION "${name}".ship_once(text)`);
        await v11.migrate();
        expect(await versionsOf(name)).toContain(12);
      } finally {
        await v11.close();
        await db.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
      }
    });
  });
});
