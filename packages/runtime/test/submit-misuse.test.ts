import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAsyncCommands, defineExecutor } from '../src/index.js';
import type { SubmitOptions } from '../src/index.js';
import type { OpsDatabase } from './ops/admin-http.suite.js';
import { openMysql, openPostgres, openSqlite } from './ops/databases.js';

/*
 * The mistakes a caller makes with a submit's arguments — a misspelt option, null options, null or
 * a foreign object as the transaction — each refused with INVALID_ARGUMENT naming the mistake,
 * with the same message on every database, and nothing written.
 */

const notify = defineExecutor<'order.notify', { orderId: string }>({
  type: 'order.notify',
  mode: 'SCHEDULED',
  execute: () => undefined,
});

const payload = { orderId: 'o-1' };

/** The refusal of `attempt`: its code and message (a resolved attempt fails the test). */
async function refusal(attempt: () => Promise<unknown>): Promise<{ code: unknown; message: string }> {
  try {
    await attempt();
  } catch (e) {
    return { code: (e as { code?: unknown }).code, message: (e as Error).message };
  }
  throw new Error('the misuse was accepted');
}

const databases: [string, () => Promise<OpsDatabase>][] = [
  ['SQLite', openSqlite],
  ['PostgreSQL', () => openPostgres('submit_misuse')],
  ['MariaDB', () => openMysql('submit_misuse')],
];

describe.each(databases)('submit misuse on %s', (_name, open) => {
  let db: OpsDatabase;
  beforeAll(async () => {
    db = await open();
  });
  afterAll(async () => {
    await db.dispose();
  });

  const runtimeOn = () => createAsyncCommands({ store: db.store, executors: [notify] }).client;

  it('refuses an unknown option, naming it and the options there are', async () => {
    const client = runtimeOn();
    const misspelt = { prioirty: 1 } as unknown as SubmitOptions;
    const inSubmit = await refusal(() =>
      client.transaction((_tx, submit) => submit('order.notify', payload, misspelt)),
    );
    expect(inSubmit.code).toBe('INVALID_ARGUMENT');
    expect(inSubmit.message).toBe(
      'submit options: unknown option "prioirty"; the options are bizKey, runAt, maxRetry, owner, headers, priority, orderingKey, dependsOn',
    );
    // dependsOn is submit's alone: a batch or an idempotent submit does not wait (docs/workflows.md).
    const waitingMany = await refusal(() =>
      client.transaction((tx) =>
        client.submitMany(tx, [{ type: 'order.notify', payload, dependsOn: ['1'] } as never]),
      ),
    );
    expect(waitingMany.message).toMatch(/^submitMany item 0: unknown option "dependsOn"/);
    const waitingIdempotent = await refusal(() =>
      client.transaction((tx) =>
        client.submitIdempotent(tx, 'order.notify', 'k', payload, { dependsOn: ['1'] } as never),
      ),
    );
    expect(waitingIdempotent.message).toMatch(/^submitIdempotent options: unknown option "dependsOn"/);
    const inMany = await refusal(() =>
      client.transaction((tx) =>
        client.submitMany(tx, [
          { type: 'order.notify', payload },
          { type: 'order.notify', payload, ...misspelt },
        ]),
      ),
    );
    expect(inMany).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/^submitMany item 1: unknown option "prioirty"/),
    });
    const inIdempotent = await refusal(() =>
      client.transaction((tx) =>
        client.submitIdempotent(tx, 'order.notify', 'k', payload, { bizKey: 'k' } as never),
      ),
    );
    expect(inIdempotent).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/^submitIdempotent options: unknown option "bizKey"; .*onPending$/),
    });
    expect((await db.store.list({ type: 'order.notify' })).items).toEqual([]);
  });

  it('refuses null options and a submitMany that is not an array of objects', async () => {
    const client = runtimeOn();
    const results = await Promise.all([
      refusal(() =>
        client.transaction((tx) =>
          client.submit(tx, 'order.notify', payload, null as unknown as SubmitOptions),
        ),
      ),
      refusal(() =>
        client.transaction((tx) => client.submitIdempotent(tx, 'order.notify', 'k', payload, null as never)),
      ),
      refusal(() => client.transaction((tx) => client.submitMany(tx, null as never))),
      refusal(() => client.transaction((tx) => client.submitMany(tx, [null] as never))),
    ]);
    expect(results).toEqual([
      { code: 'INVALID_ARGUMENT', message: 'submit options must be an object or left out, not null' },
      {
        code: 'INVALID_ARGUMENT',
        message: 'submitIdempotent options must be an object or left out, not null',
      },
      { code: 'INVALID_ARGUMENT', message: 'submitMany takes an array of { type, payload, ...options }' },
      {
        code: 'INVALID_ARGUMENT',
        message: 'submitMany item 0 must be an object { type, payload, ...options }',
      },
    ]);
    expect((await db.store.list({ type: 'order.notify' })).items).toEqual([]);
  });

  it('refuses null or a foreign object as the transaction, naming what it got', async () => {
    const client = runtimeOn();
    for (const [tx, named] of [
      [null, 'null'],
      [undefined, 'undefined'],
      [{}, 'a plain object'],
      [new Map(), 'a Map'],
    ] as const) {
      for (const attempt of [
        () => client.submit(tx as never, 'order.notify', payload),
        () => client.submitIdempotent(tx as never, 'order.notify', 'k', payload),
        () => client.submitMany(tx as never, [{ type: 'order.notify', payload }]),
      ]) {
        const refused = await refusal(attempt);
        expect(refused.code).toBe('INVALID_ARGUMENT');
        expect(refused.message).toMatch(
          new RegExp(
            `^a submit's transaction must be a [\\w/.-]+ (client|connection|database) or an SqlExecutor, not ${named}$`,
          ),
        );
      }
    }
    expect((await db.store.list({ type: 'order.notify' })).items).toEqual([]);
  });
});
