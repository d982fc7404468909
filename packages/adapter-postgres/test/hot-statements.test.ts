import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { arrayLiteral } from '../src/pipeline/hot-statements.js';
import type { PostgresCommandStore } from '../src/index.js';
import { adminQuery, command, dropSchema, openStore, uniqueSchema } from './helpers.js';

const schema = uniqueSchema('acpg_hot');
let store: PostgresCommandStore;

beforeAll(async () => {
  store = await openStore(schema);
  // Completing a 'hot.boom' command fails in the database, whatever runs with it.
  await adminQuery(`CREATE FUNCTION "${schema}".refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.type = 'hot.boom' AND NEW.status = 'SUCCESS' THEN RAISE EXCEPTION 'boom refused'; END IF;
    RETURN NEW; END $$`);
  // A SUCCESS is an insert into the history (the move), or an update of a row that stays.
  await adminQuery(`CREATE TRIGGER refuse_boom BEFORE INSERT ON "${schema}".async_command_history
    FOR EACH ROW EXECUTE FUNCTION "${schema}".refuse_boom()`);
  await adminQuery(`CREATE TRIGGER refuse_boom BEFORE UPDATE ON "${schema}".async_command
    FOR EACH ROW EXECUTE FUNCTION "${schema}".refuse_boom()`);
});

afterAll(async () => {
  await store?.close();
  await dropSchema(schema);
});

const claim = (types: string[], limit = 10) =>
  store.claimDue({ types, limit, now: new Date(Date.now() + 1), token: randomUUID(), leaseMs: 60_000 });

/** How `fn` used the hot pool: connections checked out (batches) and statements sent alone. */
async function hotPoolUse(fn: () => Promise<unknown>): Promise<{ batches: number; alone: number }> {
  const connect = vi.spyOn(store.hotPool, 'connect');
  const query = vi.spyOn(store.hotPool, 'query');
  try {
    await fn();
    // pool.query checks a connection out too: what is left are the batches' own checkouts.
    return { batches: connect.mock.calls.length - query.mock.calls.length, alone: query.mock.calls.length };
  } finally {
    connect.mockRestore();
    query.mockRestore();
  }
}

describe('PostgreSQL hot-path statements', () => {
  it('sends the statements asked for in one turn as one batch, each with its own answer', async () => {
    await store.transaction((tx) => store.insert(tx, [command('hot.a'), command('hot.a'), command('hot.b')]));
    const [first] = await claim(['hot.a'], 1);
    let answers: unknown[] = [];
    const use = await hotPoolUse(async () => {
      // A runtime's turn under load: the last batch's completion and the next claim together.
      answers = await Promise.all([
        store.complete([{ id: first!.id, token: first!.claimToken }]),
        claim(['hot.a']),
        claim(['hot.b']),
        store.heartbeat([{ id: first!.id, token: first!.claimToken }], 1_000), // completed: fenced out
      ]);
    });
    expect(use).toEqual({ batches: 1, alone: 0 });
    const [completed, a, b, held] = answers as [string[], { type: string }[], { type: string }[], unknown[]];
    expect(completed).toEqual([first!.id]);
    expect(a.map((c) => c.type)).toEqual(['hot.a']);
    expect(b.map((c) => c.type)).toEqual(['hot.b']);
    expect(held).toEqual([]);
    expect((await store.get(first!.id))?.status).toBe('SUCCESS');
    // A lone statement goes out alone, as pg's own prepared statement.
    expect(await hotPoolUse(() => claim(['hot.none']))).toEqual({ batches: 0, alone: 1 });
  });

  it('lets no statement of a batch fail the others: a failed batch runs each alone', async () => {
    await store.transaction((tx) =>
      store.insert(tx, [command('hot.boom'), command('hot.fine'), command('hot.next')]),
    );
    const [boom] = await claim(['hot.boom']);
    const [fine] = await claim(['hot.fine']);
    const results = await Promise.allSettled([
      store.complete([{ id: boom!.id, token: boom!.claimToken }]),
      store.complete([{ id: fine!.id, token: fine!.claimToken }]),
      claim(['hot.next']),
    ]);
    expect(results[0]).toMatchObject({ status: 'rejected', reason: { message: 'boom refused' } });
    expect(results[1]).toEqual({ status: 'fulfilled', value: [fine!.id] });
    expect(results[2]).toMatchObject({ status: 'fulfilled', value: [{ type: 'hot.next' }] });
    expect((await store.get(boom!.id))?.status).toBe('RUNNING');
    expect((await store.get(fine!.id))?.status).toBe('SUCCESS');
  });

  it('a complete whose attempts carry results rides in the batch too; results arrive as written', async () => {
    await store.transaction((tx) =>
      store.insert(tx, [command('hot.res'), command('hot.res'), command('hot.res'), command('hot.res2')]),
    );
    const [a, b, c] = await claim(['hot.res'], 3);
    const results = ['{"q": "say \\"NULL\\"", "b": "C:\\\\x", "e": "☃ 😀"}', '"NULL"', '{ "kept":  [1, 2] }'];
    let answers: unknown[] = [];
    const use = await hotPoolUse(async () => {
      answers = await Promise.all([
        store.complete([
          { id: a!.id, token: a!.claimToken, resultJson: results[0]! },
          { id: b!.id, token: b!.claimToken },
          { id: c!.id, token: c!.claimToken, resultJson: results[1]! },
        ]),
        claim(['hot.res2']),
      ]);
    });
    expect(use).toEqual({ batches: 1, alone: 0 });
    expect([...(answers[0] as string[])].sort()).toEqual([a!.id, b!.id, c!.id].sort());
    const stored = await adminQuery<{ id: string; result: string | null }>(
      `SELECT id::text AS id, result::text AS result FROM "${schema}".async_command_history WHERE id = ANY($1::bigint[])`,
      [[a!.id, b!.id, c!.id]],
    );
    expect(Object.fromEntries(stored.map((r) => [r.id, r.result]))).toEqual({
      [a!.id]: results[0],
      [b!.id]: null,
      [c!.id]: results[1],
    });
    expect((await store.get(a!.id))?.result).toEqual(JSON.parse(results[0]!));
    expect((await store.get(c!.id))?.result).toBe('NULL');
    const [d] = answers[1] as { id: string; claimToken: string }[];
    // Text the json cast refuses: INVALID_ARGUMENT without the driver's words, nothing written.
    const refused = await store
      .complete([{ id: d!.id, token: d!.claimToken, resultJson: 'not json' }])
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/^a result must be JSON text/),
    });
    expect((await store.get(d!.id))?.status).toBe('RUNNING');
    expect(await store.complete([{ id: d!.id, token: d!.claimToken, resultJson: results[2]! }])).toEqual([
      d!.id,
    ]);
    const [kept] = await adminQuery<{ result: string }>(
      `SELECT result::text AS result FROM "${schema}".async_command_history WHERE id = $1::bigint`,
      [d!.id],
    );
    expect(kept!.result).toBe(results[2]);
  });

  it('binds arrays in a batch as PostgreSQL reads them: quotes, backslashes, commas, braces', async () => {
    const types = ['hot "quoted"', 'hot\\back', 'hot,comma', 'hot{brace}', 'hot NULL'];
    await store.transaction((tx) =>
      store.insert(
        tx,
        types.map((t) => command(t)),
      ),
    );
    const [claimed, none] = await Promise.all([claim(types), claim(['hot.nothing'])]);
    expect(claimed!.map((c) => c.type).sort()).toEqual([...types].sort());
    expect(none).toEqual([]);
    expect(arrayLiteral(['a', null, 'b"c'])).toBe('{"a",NULL,"b\\"c"}');
  });
});
