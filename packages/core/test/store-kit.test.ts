import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { isAsyncCommandError } from '@asynccmd/core';
import { decodeListCursor } from '../src/input-checks.js';
import type { CommandRecord, CommandStatus } from '@asynccmd/core';
import {
  ADMIN_TRANSITION_ATTEMPTS,
  guardedTransition,
  IDEMPOTENT_INSERT_ATTEMPTS,
  inCallersOrder,
  insertIdempotently,
  keyHeldBy,
  listPage,
  recordFromRow,
  StoreInput,
} from '@asynccmd/core/store-kit';
import type { GuardedAttempt, StoredCommandRow } from '@asynccmd/core/store-kit';

const row = (
  id: string,
  status: CommandStatus,
  createdAt = 1_700_000_000_000,
): StoredCommandRow<number, number, number> => ({
  id,
  type: 't',
  biz_key: null,
  payload: '{"a":1}',
  status,
  max_retry: 3,
  retry_count: 1,
  rescue_count: 0,
  next_run_at: createdAt,
  priority: 0,
  ordering_key: null,
  last_error: null,
  owner: null,
  claim_token: 'tok',
  lease_until: createdAt + 1000,
  idempotent: 1,
  headers: '{}',
  created_at: createdAt,
  updated_at: createdAt,
  started_at: null,
  finished_at: null,
  retry_count_at_retry: 0,
  rescue_count_at_retry: 0,
  claimed_by: null,
  history: null,
});
const decoding = {
  time: (ms: number) => new Date(ms),
  count: (n: number) => n,
  flag: (v: number) => v === 1,
};
const record = (id: string, status: CommandStatus): CommandRecord => recordFromRow(row(id, status), decoding);

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => undefined,
    (e: unknown) => e,
  );
}

describe('guardedTransition', () => {
  it('answers the write that applied, a missing command, and a status the transition does not start from', async () => {
    const applied = await guardedTransition('cancel', '1', async () => ({
      applied: record('1', 'CANCELLED'),
    }));
    expect(E.isRight(applied) && applied.right.status).toBe('CANCELLED');
    const missing = await guardedTransition('cancel', '2', async () => ({ unmatched: null }));
    expect(E.isLeft(missing) && missing.left.code).toBe('NOT_FOUND');
    const refused = await guardedTransition('retry', '3', async () => ({ unmatched: 'SUCCESS' }));
    expect(E.isLeft(refused) && refused.left.code).toBe('ILLEGAL_TRANSITION');
    const held = await guardedTransition('retry', '4', async () => keyHeldBy('4', '9'));
    expect(E.isLeft(held) && held.left).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', holderId: '9' });
  });

  it('tries again while the row sits in a source state it did not match, then gives up with a typed error', async () => {
    let tries = 0;
    const settles = await guardedTransition('retry', '5', async (): Promise<GuardedAttempt> => {
      tries++;
      return tries < 3 ? { unmatched: 'DEAD' } : { applied: record('5', 'PENDING') };
    });
    expect(E.isRight(settles)).toBe(true);
    expect(tries).toBe(3);

    tries = 0;
    const error = await rejection(
      guardedTransition('requeue', '6', async () => {
        tries++;
        return { unmatched: 'RUNNING' };
      }),
    );
    expect(tries).toBe(ADMIN_TRANSITION_ATTEMPTS);
    expect(isAsyncCommandError(error) && error.code).toBe('STORE_CONTENTION');
    expect((error as Error).message).toContain('command 6');
  });
});

describe('insertIdempotently', () => {
  it('asks again while neither an insert nor a holder answered, within one budget', async () => {
    let tries = 0;
    const result = await insertIdempotently({ type: 't', bizKey: 'k' }, async () =>
      ++tries < 4 ? null : { id: '1', duplicate: true },
    );
    expect(result).toEqual({ id: '1', duplicate: true });
    tries = 0;
    const error = await rejection(
      insertIdempotently({ type: 't', bizKey: 'k' }, async () => (tries++, null)),
    );
    expect(tries).toBe(IDEMPOTENT_INSERT_ATTEMPTS);
    expect(isAsyncCommandError(error) && error.code).toBe('STORE_CONTENTION');
  });
});

describe('rows and pages', () => {
  it('shows a claim token and lease only while RUNNING', () => {
    expect(record('1', 'RUNNING')).toMatchObject({ claimToken: 'tok', idempotent: true, payload: { a: 1 } });
    expect(record('1', 'PENDING')).toMatchObject({ claimToken: null, leaseUntil: null });
  });

  it('pages by asking one row more, with core list cursor', () => {
    const rows = [row('3', 'PENDING', 3000), row('2', 'PENDING', 2000), row('1', 'PENDING', 1000)];
    const first = listPage(rows, 2, (r) => recordFromRow(r, decoding));
    expect(first.items.map((c) => c.id)).toEqual(['3', '2']);
    expect(decodeListCursor(first.nextCursor)).toEqual({ id: '2', createdAt: new Date(2000) });
    expect(listPage(rows.slice(0, 2), 2, (r) => recordFromRow(r, decoding)).nextCursor).toBeNull();
  });

  it("keeps the callers' order, each id once", () => {
    expect(inCallersOrder(['3', '1', '3', '2'], ['2', '3'])).toEqual(['3', '2']);
  });
});

describe('StoreInput', () => {
  const input = new StoreInput({ maxPayloadBytes: 16, textWidths: { type: 4 } });
  const code = (f: () => unknown): unknown => {
    try {
      f();
    } catch (e) {
      return isAsyncCommandError(e) ? e.code : e;
    }
    return undefined;
  };

  it('checks maxPayloadBytes once, where the store is built', () => {
    expect(code(() => new StoreInput({ maxPayloadBytes: 0 }))).toBe('INVALID_ARGUMENT');
    expect(
      code(() => input.command({ type: 't', payloadJson: JSON.stringify('x'.repeat(20)), maxRetry: 0 })),
    ).toBe('PAYLOAD_TOO_LARGE');
  });

  it('refuses text wider than its column, a missing bizKey, and purging unfinished commands', () => {
    expect(code(() => input.command({ type: 'abcde', payloadJson: '{}', maxRetry: 0 }))).toBe(
      'INVALID_ARGUMENT',
    );
    expect(code(() => input.idempotentCommand({ type: 't', payloadJson: '{}', maxRetry: 0 }))).toBe(
      'INVALID_ARGUMENT',
    );
    expect(
      code(() => input.purge({ olderThan: new Date(), limit: 1, statuses: ['PENDING' as 'DEAD'] })),
    ).toBe('INVALID_ARGUMENT');
    expect(input.purge({ olderThan: new Date(), limit: 0 })).toBeNull();
    expect(input.purge({ olderThan: new Date(), limit: 5, statuses: ['DEAD', 'DEAD'] })?.statuses).toEqual([
      'DEAD',
    ]);
  });

  it('cleans error text of NUL, so recording a failure never fails on what it said', () => {
    expect(input.reason('a\u0000b')).toBe('a\uFFFDb');
    const [attempt] = input.failedAttempts([
      {
        ref: { id: '1', token: 'tok' },
        outcome: { status: 'DEAD', retryCount: 1, nextRunAt: new Date(), lastError: 'x\u0000' },
      },
    ]);
    expect(attempt?.lastError).toBe('x\uFFFD');
  });
});
