import { describe, expect, it } from 'vitest';
import { redactErrorText, type CommandRecord } from '@asynccmd/core';
import { createAsyncCommands, defineExecutor } from '../src/index.js';
import { openTempSqlite, type TempSqlite } from './ops/support.js';

/*
 * Error text is stored as lastError and in the history, where every dashboard and admin API user
 * reads it: by default the secrets it commonly carries are redacted first; `redactError` replaces
 * the rule.
 */

const LEAKY =
  'connect to postgres://app:hunter2@db.internal:5432/orders failed (password=hunter2 sslmode=require)';

const leaky = defineExecutor<'leaky.job', { n: number }>({
  type: 'leaky.job',
  mode: 'ASYNC_POOL',
  maxRetry: 0,
  execute: () => {
    throw new Error(LEAKY);
  },
});

/** Runs one leaky command to DEAD on a runtime with `options`; its record and the events' error text. */
async function deadLetter(options: { redactError?: (text: string) => string } = {}) {
  const db: TempSqlite = await openTempSqlite();
  try {
    return await runToDead(db, options);
  } finally {
    await db.dispose();
  }
}

async function runToDead(db: TempSqlite, options: { redactError?: (text: string) => string }) {
  const runtime = createAsyncCommands({
    store: db.store,
    executors: [leaky],
    pollIntervalMs: 20,
    ...options,
  });
  const reported: string[] = [];
  runtime.on((e) => {
    if (e.kind === 'dead') reported.push(e.error);
  });
  const id = await runtime.client.transaction((_tx, submit) => submit('leaky.job', { n: 1 }));
  runtime.start();
  let record: CommandRecord | null = null;
  for (let i = 0; i < 500 && record?.status !== 'DEAD'; i++) {
    await new Promise((r) => setTimeout(r, 10));
    record = await db.store.get(id);
  }
  await runtime.stop({ closeStore: false });
  return { record, reported };
}

describe('redactError', () => {
  it('by default stores, reports and shows the error with URL passwords and password= pairs redacted', async () => {
    const { record, reported } = await deadLetter();
    const redacted =
      'connect to postgres://app:***@db.internal:5432/orders failed (password=*** sslmode=require)';
    expect(record?.status).toBe('DEAD');
    expect(record?.lastError).toBe(redacted);
    expect(record?.history.map((a) => a.error)).toEqual([redacted]);
    expect(reported).toEqual([redacted]);
    expect(JSON.stringify(record)).not.toContain('hunter2');
  });

  it('takes a rule of its own (identity: as thrown), and falls back to the default when it throws', async () => {
    expect((await deadLetter({ redactError: (text) => text })).record?.lastError).toBe(LEAKY);
    const custom = await deadLetter({ redactError: (text) => text.replace(/db\.internal/g, '<host>') });
    expect(custom.record?.lastError).toContain('@<host>:5432');
    const throwing = await deadLetter({
      redactError: () => {
        throw new Error('bug in the rule');
      },
    });
    expect(throwing.record?.lastError).toBe(redactErrorText(LEAKY));
  });

  it('is checked like every option', () => {
    expect(() =>
      createAsyncCommands({ store: {} as never, executors: [], redactError: 'yes' as never }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

describe('redactErrorText', () => {
  it('hides URL passwords, password-style pairs and bearer credentials, and leaves other text alone', () => {
    const cases: [string, string][] = [
      ['mysql://root:s3cret@127.0.0.1:3306/app', 'mysql://root:***@127.0.0.1:3306/app'],
      ['?user=a&password=s3cr3t&x=1', '?user=a&password=***&x=1'],
      ['{"password":"hunter2","user":"a"}', '{"password":"***","user":"a"}'],
      [
        "PGPASSWORD=x api_key: ZZZ, pwd='a b' token=abc;",
        "PGPASSWORD=*** api_key: ***, pwd='***' token=***;",
      ],
      ['Authorization: Bearer abcdefghijkl123', 'Authorization: Bearer ***'],
      ['mysql://root@localhost/x has no password', 'mysql://root@localhost/x has no password'],
      ['the passwords table is missing; author=Bob', 'the passwords table is missing; author=Bob'],
    ];
    for (const [text, expected] of cases) expect(redactErrorText(text), text).toBe(expected);
  });
});
