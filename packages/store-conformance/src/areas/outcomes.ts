import { describe, expect, it } from 'vitest';
import {
  decideFailure,
  exponentialBackoff,
  immediateBackoff,
  truncateErrorText,
  LIMITS,
} from '@asynccmd/core';
import type { CommandId, CommandStore } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  claim,
  claimOne,
  freshToken,
  newCommand,
  submit,
  submitOne,
  uniqueType,
  useArea,
} from '../support.js';
import { ATTEMPT_HISTORY_LENGTH } from '@asynccmd/core/store-kit';

const backoff = exponentialBackoff({ baseMs: 60_000, capMs: 3_600_000 });

/** Claims the one command of `type` as `instance` and records its failure with `message`; returns the outcome's status. */
export async function failOnce<Tx>(
  store: CommandStore<Tx>,
  type: string,
  message: string,
  instance?: string,
): Promise<{ id: CommandId; status: 'PENDING' | 'DEAD' }> {
  const c = await claimOne(store, type, instance === undefined ? {} : { instance });
  const outcome = decideFailure(c, new Error(message), new Date(), immediateBackoff);
  expect(await store.fail([{ ref: { id: c.id, token: c.claimToken }, outcome }])).toEqual([c.id]);
  return { id: c.id, status: outcome.status };
}

export function outcomesArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('outcomes: complete, fail, heartbeat, release', () => {
    const ctx = useArea(factory, adapter, 'out');

    it('complete is fenced by the claim token', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type));
      const c = await claimOne(store, type);
      expect(await store.complete([{ id, token: 'someone-else' }])).toEqual([]);
      expect(await store.get(id)).toMatchObject({ status: 'RUNNING', claimToken: c.claimToken });
      const before = await store.now();
      expect(await store.complete([{ id, token: c.claimToken }])).toEqual([id]);
      const done = await store.get(id);
      expect(done).toMatchObject({ status: 'SUCCESS', claimToken: null, leaseUntil: null });
      expect(done!.finishedAt!.getTime()).toBeGreaterThanOrEqual(before.getTime());
      // Another claim's complete of a finished command is fenced out.
      expect(await store.complete([{ id, token: 'someone-else' }])).toEqual([]);
      expect(await store.complete([])).toEqual([]);
    });

    it('complete twice with the same token: the second is already recorded (a retry whose first reply was lost), and changes nothing', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const [a, b] = await submit(store, [newCommand(type), newCommand(type)]);
      const claimed = await claim(store, type, { limit: 2 });
      const refs = claimed.map((c) => ({ id: c.id, token: c.claimToken }));
      const [first] = refs.filter((r) => r.id === a);
      expect(await store.complete([first!])).toEqual([a]);
      const done = await store.get(a!);
      // The retry carries the first ref again beside a ref of its batch that had not landed.
      expect([...(await store.complete(refs))].sort()).toEqual([a, b].sort());
      expect(await store.complete([first!])).toEqual([a]);
      expect(await store.get(a!)).toEqual(done);
      expect(done).toMatchObject({ status: 'SUCCESS', claimToken: null });
    });

    it('fail twice with the same token and outcome: the second is already recorded and changes nothing; another outcome or claim is fenced', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const [a, b] = await submit(store, [
        newCommand(type, { maxRetry: 3 }),
        newCommand(type, { maxRetry: 3 }),
      ]);
      const claimed = await claim(store, type, { limit: 2 });
      const attempts = claimed.map((c) => ({
        ref: { id: c.id, token: c.claimToken },
        outcome: decideFailure(c, new Error(`no ${c.id}`), new Date(), backoff),
      }));
      const [first] = attempts.filter((x) => x.ref.id === a);
      expect(await store.fail([first!])).toEqual([a]);
      const failed = await store.get(a!);
      // The retry carries the first attempt again beside one of its batch that had not landed.
      expect([...(await store.fail(attempts))].sort()).toEqual([a, b].sort());
      expect(await store.fail([first!])).toEqual([a]);
      expect(await store.get(a!)).toEqual(failed);
      expect(failed).toMatchObject({ status: 'PENDING', retryCount: 1, claimToken: null });
      expect(failed!.history).toHaveLength(1);
      // The same claim with another outcome is not the outcome on the row.
      const dead = { ...first!.outcome, status: 'DEAD' as const };
      expect(await store.fail([{ ref: first!.ref, outcome: dead }])).toEqual([]);
      expect(await store.complete([first!.ref])).toEqual([]);
      expect(await store.get(a!)).toEqual(failed);
    });

    it('a complete under a claim whose attempt ended otherwise (failed, then completed by another claim) is fenced', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type, { maxRetry: 3 }));
      const first = await claimOne(store, type);
      const outcome = decideFailure(first, new Error('no'), new Date(), immediateBackoff);
      expect(await store.fail([{ ref: { id, token: first.claimToken }, outcome }])).toEqual([id]);
      expect(await store.complete([{ id, token: first.claimToken }])).toEqual([]);
      const second = await claimOne(store, type);
      expect(await store.complete([{ id, token: second.claimToken }])).toEqual([id]);
      // The command is SUCCESS now, but not under the first claim.
      expect(await store.complete([{ id, token: first.claimToken }])).toEqual([]);
      expect(await store.get(id)).toMatchObject({ status: 'SUCCESS', retryCount: 1 });
    });

    it('complete takes a batch and completes exactly the refs whose claim still holds', async () => {
      const store = ctx.store();
      const type = uniqueType();
      await submit(
        store,
        Array.from({ length: 250 }, () => newCommand(type)),
      );
      const claimed = await claim(store, type, { limit: 250 });
      expect(claimed).toHaveLength(250);
      const refs = claimed.map((c, i) => ({ id: c.id, token: i % 10 === 0 ? 'stale' : c.claimToken }));
      const done = await store.complete(refs);
      const expected = claimed.filter((_, i) => i % 10 !== 0).map((c) => c.id);
      expect([...done].sort()).toEqual([...expected].sort());
      const statuses = (await store.getMany(claimed.map((c) => c.id))).map((c) => c.status);
      expect(statuses.filter((s) => s === 'SUCCESS')).toHaveLength(225);
      expect(statuses.filter((s) => s === 'RUNNING')).toHaveLength(25);
    });

    it('each attempt goes into the history (start, end, instance, outcome, error); a success clears lastError', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type, { maxRetry: 3 }));
      const before = await store.now();
      const first = await claimOne(store, type, { instance: 'worker-a/7' });
      expect(first).toMatchObject({ claimedBy: 'worker-a/7', history: [] });
      const error = 'Error: the "ledger" said no ☃';
      const outcome = decideFailure(first, error, new Date(), immediateBackoff);
      expect(await store.fail([{ ref: { id, token: first.claimToken }, outcome }])).toEqual([id]);
      const second = await claimOne(store, type, { instance: 'worker-b/9' });
      expect(await store.complete([{ id, token: second.claimToken }])).toEqual([id]);
      const after = await store.now();
      const done = await store.get(id);
      expect(done).toMatchObject({
        status: 'SUCCESS',
        lastError: null,
        retryCount: 1,
        claimedBy: 'worker-b/9',
      });
      expect(done!.history).toEqual([
        {
          startedAt: first.startedAt,
          finishedAt: expect.any(Date),
          instance: 'worker-a/7',
          outcome: 'failed',
          error,
        },
        {
          startedAt: second.startedAt,
          finishedAt: expect.any(Date),
          instance: 'worker-b/9',
          outcome: 'succeeded',
          error: null,
        },
      ]);
      const [failed, succeeded] = done!.history;
      expect(failed!.finishedAt.getTime()).toBeGreaterThanOrEqual(before.getTime());
      expect(failed!.finishedAt.getTime()).toBeLessThanOrEqual(second.startedAt!.getTime());
      expect(succeeded!.finishedAt.getTime()).toBeLessThanOrEqual(after.getTime());
      expect(succeeded!.finishedAt).toEqual(done!.finishedAt);
      expect(await store.list({ type })).toMatchObject({ items: [{ history: done!.history }] });
    });

    it(`the history keeps the latest ${ATTEMPT_HISTORY_LENGTH} attempts, oldest first`, async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type, { maxRetry: 11 }));
      for (let n = 1; n <= 12; n++) {
        expect(await failOnce(store, type, `attempt ${n}`, `i${n}`)).toEqual({
          id,
          status: n === 12 ? 'DEAD' : 'PENDING',
        });
      }
      const dead = await store.get(id);
      expect(dead).toMatchObject({ status: 'DEAD', retryCount: 12, lastError: 'attempt 12' });
      const kept = Array.from(
        { length: ATTEMPT_HISTORY_LENGTH },
        (_, i) => 12 - ATTEMPT_HISTORY_LENGTH + 1 + i,
      );
      expect(dead!.history.map((a) => [a.instance, a.outcome, a.error])).toEqual(
        kept.map((n) => [`i${n}`, n === 12 ? 'dead' : 'failed', `attempt ${n}`]),
      );
    });

    it('a claim names its instance or none; a malformed one is refused before anything is written', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type));
      for (const instance of ['', 'x'.repeat(129), 42]) {
        await expect(claim(store, type, { instance: instance as string })).rejects.toMatchObject({
          code: 'INVALID_ARGUMENT',
        });
        await expect(
          store.claimById({
            id,
            now: new Date(),
            token: freshToken(),
            leaseMs: 1000,
            instance: instance as string,
          }),
        ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      }
      const c = await claimOne(store, type);
      expect(c.claimedBy).toBeNull();
      expect(await store.complete([{ id, token: c.claimToken }])).toEqual([id]);
      expect((await store.get(id))!.history).toEqual([
        expect.objectContaining({ instance: null, outcome: 'succeeded' }),
      ]);
      const longest = uniqueType();
      await submitOne(store, newCommand(longest));
      expect((await claimOne(store, longest, { instance: '名'.repeat(128) })).claimedBy).toBe(
        '名'.repeat(128),
      );
    });

    it('a stale executor cannot overwrite the outcome of a newer claim', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type));
      const first = await claimOne(store, type);
      // The first claim is forced back (as a reclaim would), and the command is claimed again.
      expect((await store.requeue(id, new Date(Date.now() - 1000)))._tag).toBe('Right');
      expect(await store.releaseRevoked([{ id, token: first.claimToken }])).toEqual([id]);
      const second = await claimOne(store, type);
      expect(second.claimToken).not.toBe(first.claimToken);
      const failure = decideFailure(first, new Error('late'), new Date(), backoff);
      expect(await store.fail([{ ref: { id, token: first.claimToken }, outcome: failure }])).toEqual([]);
      expect(await store.complete([{ id, token: first.claimToken }])).toEqual([]);
      expect(await store.heartbeat([{ id, token: first.claimToken }], 60_000)).toEqual([]);
      expect(await store.release([{ id, token: first.claimToken }])).toEqual([]);
      expect(await store.get(id)).toMatchObject({
        status: 'RUNNING',
        claimToken: second.claimToken,
        retryCount: 0,
      });
      expect(await store.complete([{ id, token: second.claimToken }])).toEqual([id]);
    });

    it('fail with retries left → PENDING at the backoff time, not claimable before it', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type, { maxRetry: 2 }));
      const c = await claimOne(store, type);
      const now = new Date(Date.UTC(2030, 5, 1, 12, 0, 0, 250));
      const outcome = decideFailure(c, new TypeError('downstream said 503'), now, backoff);
      expect(outcome.status).toBe('PENDING');
      expect(await store.fail([{ ref: { id, token: c.claimToken }, outcome }])).toEqual([id]);
      const after = await store.get(id);
      expect(after).toMatchObject({
        status: 'PENDING',
        retryCount: 1,
        lastError: 'TypeError: downstream said 503',
        claimToken: null,
        leaseUntil: null,
        finishedAt: null,
      });
      expect(after!.nextRunAt.getTime()).toBe(now.getTime() + 60_000);
      expect(await claim(store, type, { now: new Date(now.getTime() + 59_999) })).toEqual([]);
      const again = await claimOne(store, type, { now: new Date(now.getTime() + 60_000) });
      // The second failure backs off twice as long.
      const second = decideFailure(again, new Error('still down'), now, backoff);
      expect(await store.fail([{ ref: { id, token: again.claimToken }, outcome: second }])).toEqual([id]);
      expect((await store.get(id))!.nextRunAt.getTime()).toBe(now.getTime() + 120_000);
      expect((await store.get(id))!.retryCount).toBe(2);
    });

    it('fail with retries exhausted → DEAD, finished, never claimed again', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type, { maxRetry: 0 }));
      const c = await claimOne(store, type);
      const outcome = decideFailure(c, new Error('card declined'), new Date(), backoff);
      expect(outcome.status).toBe('DEAD');
      expect(await store.fail([{ ref: { id, token: c.claimToken }, outcome }])).toEqual([id]);
      const dead = await store.get(id);
      expect(dead).toMatchObject({
        status: 'DEAD',
        retryCount: 1,
        lastError: 'card declined',
        claimToken: null,
      });
      expect(dead!.finishedAt).toBeInstanceOf(Date);
      expect(await claim(store, type, { now: new Date(8.64e15) })).toEqual([]);
    });

    it('fail writes many attempts at once, each its own outcome, fenced by its own token, checking all first', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const ids = await submit(
        store,
        Array.from({ length: 5 }, () => newCommand(type)),
      );
      const claimed = await claim(store, type, { limit: 5 });
      expect(claimed.map((c) => c.id)).toEqual(ids);
      const [a, b, c, d] = claimed;
      const now = new Date();
      const retry = decideFailure(
        { maxRetry: 5, retryCount: 0, retryCountAtRetry: 0 },
        new Error('retry me'),
        now,
        backoff,
      );
      const dead = decideFailure(
        { maxRetry: 2, retryCount: 2, retryCountAtRetry: 0 },
        new Error('gave up ☃'),
        now,
        backoff,
      );
      const bogus = { ...dead, status: 'SUCCESS' } as never;
      // One bad outcome anywhere: a typed error, and nothing written.
      await expect(
        store.fail([
          { ref: { id: a!.id, token: a!.claimToken }, outcome: retry },
          { ref: { id: b!.id, token: b!.claimToken }, outcome: bogus },
        ]),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect((await store.getMany(ids)).map((r) => r.status)).toEqual(Array(5).fill('RUNNING'));
      const written = await store.fail([
        { ref: { id: c!.id, token: freshToken() }, outcome: retry }, // fenced out
        { ref: { id: b!.id, token: b!.claimToken }, outcome: dead },
        { ref: { id: a!.id, token: a!.claimToken }, outcome: retry },
        { ref: { id: d!.id, token: d!.claimToken }, outcome: retry },
      ]);
      expect(written).toEqual([b!.id, a!.id, d!.id]);
      const [ra, rb, rc, rd, re] = await store.getMany(ids);
      for (const r of [ra, rd]) {
        expect(r).toMatchObject({
          status: 'PENDING',
          retryCount: 1,
          lastError: 'retry me',
          claimToken: null,
        });
        expect(r!.nextRunAt.getTime()).toBe(retry.nextRunAt.getTime());
        expect(r!.finishedAt).toBeNull();
      }
      expect(rb).toMatchObject({ status: 'DEAD', retryCount: 3, lastError: 'gave up ☃', claimToken: null });
      expect(rb!.finishedAt).toBeInstanceOf(Date);
      expect(rc).toMatchObject({ status: 'RUNNING', claimToken: c!.claimToken });
      expect(re!.status).toBe('RUNNING');
      // Writing one again finds it already recorded (a retry whose reply was lost); the fenced one stays fenced.
      expect(await store.fail([{ ref: { id: a!.id, token: a!.claimToken }, outcome: retry }])).toEqual([
        a!.id,
      ]);
      expect(await store.fail([{ ref: { id: c!.id, token: freshToken() }, outcome: retry }])).toEqual([]);
      expect(await store.fail([])).toEqual([]);
    });

    it('lastError survives the round trip: truncated without splitting multibyte characters', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const messages = [
        // An emoji (a surrogate pair) straddles the cut: the whole emoji must go.
        'x'.repeat(LIMITS.lastErrorChars - 1) + '😀😀 tail',
        // Three-byte characters all the way.
        '订单支付失败：'.repeat(200),
        // Exactly at the limit, ending in an emoji.
        'y'.repeat(LIMITS.lastErrorChars - 2) + '🚀',
        'quotes \' " \\ and a NUL-free control \t\n',
      ];
      await submit(
        store,
        messages.map(() => newCommand(type, { maxRetry: 5 })),
      );
      const claimed = await claim(store, type, { limit: messages.length });
      for (const [i, c] of claimed.entries()) {
        const outcome = decideFailure(c, messages[i], new Date(), backoff);
        expect(await store.fail([{ ref: { id: c.id, token: c.claimToken }, outcome }])).toEqual([c.id]);
        const stored = (await store.get(c.id))!.lastError!;
        expect(stored).toBe(truncateErrorText(messages[i]!));
        expect(stored.length).toBeLessThanOrEqual(LIMITS.lastErrorChars);
        expect(stored).toBe(stored.toWellFormed());
      }
      expect((await store.get(claimed[0]!.id))!.lastError).toHaveLength(LIMITS.lastErrorChars - 1);
      expect((await store.get(claimed[2]!.id))!.lastError).toHaveLength(LIMITS.lastErrorChars);
    });

    it('a failure whose message holds NUL characters is still recorded (what it said never blocks it)', async () => {
      const store = ctx.store();
      const type = uniqueType();
      await submitOne(store, newCommand(type, { maxRetry: 5 }));
      const c = await claimOne(store, type);
      const outcome = decideFailure(c, new Error('driver said \u0000 in the middle'), new Date(), backoff);
      expect(await store.fail([{ ref: { id: c.id, token: c.claimToken }, outcome }])).toEqual([c.id]);
      const stored = (await store.get(c.id))!;
      expect(stored.status).toBe('PENDING');
      expect(stored.retryCount).toBe(1);
      // An adapter may keep the NUL or replace it (PostgreSQL text cannot hold one), nothing else.
      expect(stored.lastError!.replace('\uFFFD', '\u0000')).toBe(outcome.lastError);
    });

    it('heartbeat extends the lease on the database clock and reports the claims that still hold', async () => {
      const store = ctx.store();
      const type = uniqueType();
      await submit(store, [newCommand(type), newCommand(type)]);
      const [a, b] = await claim(store, type, { leaseMs: 1_000 });
      const before = await store.now();
      const held = await store.heartbeat(
        [
          { id: a!.id, token: a!.claimToken },
          { id: b!.id, token: 'stale' },
        ],
        600_000,
      );
      expect(held).toEqual([{ id: a!.id, token: a!.claimToken }]);
      const extended = await store.get(a!.id);
      expect(extended!.leaseUntil!.getTime()).toBeGreaterThanOrEqual(before.getTime() + 600_000);
      expect(extended!.status).toBe('RUNNING');
      expect((await store.get(b!.id))!.leaseUntil!.getTime()).toBe(b!.leaseUntil!.getTime());
      expect(await store.heartbeat([], 1000)).toEqual([]);
    });

    it('release returns claimed-but-unstarted commands to PENDING, counting nothing against them', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const runAt = new Date(Date.UTC(2020, 0, 1));
      const [id, other] = await submit(store, [newCommand(type, { runAt }), newCommand(type, { runAt })]);
      const claimed = await claim(store, type);
      expect(claimed).toHaveLength(2);
      const released = await store.release([
        { id: id!, token: claimed.find((c) => c.id === id)!.claimToken },
        { id: other!, token: 'stale' },
      ]);
      expect(released).toEqual([id]);
      expect(await store.get(id!)).toMatchObject({
        status: 'PENDING',
        retryCount: 0,
        rescueCount: 0,
        claimToken: null,
        leaseUntil: null,
      });
      expect((await store.get(id!))!.nextRunAt.getTime()).toBe(runAt.getTime());
      expect((await store.get(other!))!.status).toBe('RUNNING');
      expect((await claim(store, type)).map((c) => c.id)).toEqual([id]);
    });

    it('refuses an outcome that is not PENDING or DEAD, and bad refs, with typed errors', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type));
      const c = await claimOne(store, type);
      const bogus = { status: 'SUCCESS', retryCount: 1, nextRunAt: new Date(), lastError: 'x' } as never;
      await expect(store.fail([{ ref: { id, token: c.claimToken }, outcome: bogus }])).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
      await expect(store.complete([{ id: 'nope', token: 't' }])).rejects.toMatchObject({
        code: 'INVALID_ID',
      });
      expect((await store.get(id))!.status).toBe('RUNNING');
      expect(await store.complete([{ id, token: freshToken() }])).toEqual([]);
    });
  });
}
