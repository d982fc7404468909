import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import { decideFailure, immediateBackoff, LIMITS } from '@asynccmd/core';
import type { CommandId, CommandStore, CompletedAttempt } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  claimOne,
  freshToken,
  later,
  newCommand,
  rejectionCode,
  submitAndClaim,
  submitOne,
  uniqueType,
  untilDatabaseClockPasses,
  useArea,
} from '../support.js';

/** JSON texts a result may be, each with the value it reads back as. */
const SAMPLES: readonly (readonly [string, unknown])[] = [
  '{"total": 42, "lines": [{"sku": "A-1", "qty": 2}], "note": null}',
  '[1, "two", [3], {"four": 4}]',
  JSON.stringify('say "hi" \\ C:\\path\\ ☃ naïve 😀 \u0000 \u2028 \ud800'),
  '"NULL"',
  '-1.5e3',
  '0',
  'true',
  'null',
  '""',
].map((json) => [json, JSON.parse(json) as unknown] as const);

/** JSON text of exactly `bytes` UTF-8 bytes: one string of one- to four-byte characters. */
function jsonOfBytes(bytes: number): string {
  const unit = 'aé☃😀'; // 1 + 2 + 3 + 4 bytes
  const body = bytes - 2;
  const text = `"${unit.repeat(Math.floor(body / 10))}${'x'.repeat(body % 10)}"`;
  expect(Buffer.byteLength(text, 'utf8')).toBe(bytes);
  return text;
}

/** Submits `n` commands of a fresh type and claims them under one token. */
const claimed = <Tx>(store: CommandStore<Tx>, n: number) => submitAndClaim(store, n, 'res');

export function resultsArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('executor results', () => {
    const ctx = useArea(factory, adapter, 'res');

    it('a complete with a result stores it with the SUCCESS; get and list read it back parsed', async () => {
      const store = ctx.store();
      const { type, rows } = await claimed(store, SAMPLES.length);
      const attempts = rows.map((c, i) => ({ id: c.id, token: c.claimToken, resultJson: SAMPLES[i]![0] }));
      expect([...(await store.complete(attempts))].sort()).toEqual(rows.map((c) => c.id).sort());
      const byId = new Map((await store.getMany(rows.map((c) => c.id))).map((r) => [r.id, r]));
      rows.forEach((c, i) => {
        expect(byId.get(c.id)).toMatchObject({ status: 'SUCCESS', result: SAMPLES[i]![1] });
      });
      for (const [i, c] of rows.entries()) expect((await store.get(c.id))?.result).toEqual(SAMPLES[i]![1]);
      const listed = new Map((await store.list({ type, limit: 100 })).items.map((r) => [r.id, r.result]));
      rows.forEach((c, i) => expect(listed.get(c.id)).toEqual(SAMPLES[i]![1]));
    });

    it('a batch mixing attempts with and without results, of two claims: each row gets its own, or null', async () => {
      const store = ctx.store();
      const first = await claimed(store, 3);
      const second = await claimed(store, 2);
      const [a, b, c] = first.rows;
      const [d, e] = second.rows;
      const attempts: CompletedAttempt[] = [
        { id: a!.id, token: a!.claimToken, resultJson: '{"of": "a"}' },
        { id: b!.id, token: b!.claimToken },
        { id: d!.id, token: d!.claimToken, resultJson: '["d"]' },
        { id: c!.id, token: c!.claimToken, resultJson: '"c"' },
        { id: e!.id, token: e!.claimToken },
      ];
      expect(await store.complete(attempts)).toEqual([a!.id, b!.id, d!.id, c!.id, e!.id]);
      const results = Object.fromEntries(
        (await store.getMany([a!.id, b!.id, c!.id, d!.id, e!.id])).map((r) => [r.id, [r.status, r.result]]),
      );
      expect(results).toEqual({
        [a!.id]: ['SUCCESS', { of: 'a' }],
        [b!.id]: ['SUCCESS', null],
        [c!.id]: ['SUCCESS', 'c'],
        [d!.id]: ['SUCCESS', ['d']],
        [e!.id]: ['SUCCESS', null],
      });
    });

    it('a fenced attempt stores no result and is not returned: a stale token, beside the live one', async () => {
      const store = ctx.store();
      const { rows } = await claimed(store, 2);
      const [a, b] = rows;
      const done = await store.complete([
        { id: a!.id, token: 'stale', resultJson: '"stale"' },
        { id: b!.id, token: 'stale', resultJson: '"stale"' },
        { id: b!.id, token: b!.claimToken, resultJson: '"live"' },
      ]);
      expect(done).toEqual([b!.id]);
      expect(await store.get(a!.id)).toMatchObject({ status: 'RUNNING', result: null });
      expect(await store.get(b!.id)).toMatchObject({ status: 'SUCCESS', result: 'live' });
      // A complete under another claim of a finished command changes nothing either.
      expect(await store.complete([{ id: b!.id, token: 'stale', resultJson: '"late"' }])).toEqual([]);
      expect((await store.get(b!.id))?.result).toBe('live');
    });

    it('an attempt whose command was requeued and claimed again meanwhile stores no result', async () => {
      const store = ctx.store();
      const type = uniqueType('res');
      const id = await submitOne(store, newCommand(type));
      const old = await claimOne(store, type);
      expect(E.isRight(await store.requeue(id, new Date()))).toBe(true);
      expect(await store.complete([{ id, token: old.claimToken, resultJson: '"old"' }])).toEqual([]);
      expect(await store.get(id)).toMatchObject({ status: 'PENDING', result: null });
      expect(await store.releaseRevoked([{ id, token: old.claimToken }])).toEqual([id]);
      const fresh = await claimOne(store, type);
      expect(fresh.result).toBeNull();
      expect(await store.complete([{ id, token: old.claimToken, resultJson: '"old"' }])).toEqual([]);
      expect(await store.get(id)).toMatchObject({ status: 'RUNNING', result: null });
      expect(await store.complete([{ id, token: fresh.claimToken, resultJson: '"new"' }])).toEqual([id]);
      expect(await store.get(id)).toMatchObject({ status: 'SUCCESS', result: 'new' });
    });

    it('an attempt whose lease ran out and whose command was reclaimed and claimed again stores no result', async () => {
      const store = ctx.store();
      const type = uniqueType('res');
      const id = await submitOne(store, newCommand(type));
      const hung = await claimOne(store, type, { leaseMs: 1 });
      await untilDatabaseClockPasses(store, hung.leaseUntil!);
      expect((await store.reclaimHung({ limit: 1000, maxRescues: 5 })).map((r) => r.id)).toContain(id);
      const again = await claimOne(store, type);
      expect(await store.complete([{ id, token: hung.claimToken, resultJson: '"hung"' }])).toEqual([]);
      expect(await store.complete([{ id, token: again.claimToken }])).toEqual([id]);
      expect(await store.get(id)).toMatchObject({ status: 'SUCCESS', result: null });
    });

    it('a retried complete of the same claim (the first landed) counts as completed and leaves the result as it is', async () => {
      const store = ctx.store();
      const { rows } = await claimed(store, 2);
      const [a, b] = rows;
      const attempts = [
        { id: a!.id, token: a!.claimToken, resultJson: '{"n": 1}' },
        { id: b!.id, token: b!.claimToken, resultJson: '{"n": 2}' },
      ];
      expect(await store.complete([attempts[0]!])).toEqual([a!.id]);
      const done = await store.get(a!.id);
      expect(done?.result).toEqual({ n: 1 });
      // The retry carries the landed attempt again beside one of its batch that had not landed.
      expect(await store.complete(attempts)).toEqual([a!.id, b!.id]);
      expect(await store.complete([attempts[0]!])).toEqual([a!.id]);
      expect(await store.get(a!.id)).toEqual(done);
      expect((await store.get(b!.id))?.result).toEqual({ n: 2 });
    });

    it('PENDING, claimed, failed and dead commands have no result', async () => {
      const store = ctx.store();
      const type = uniqueType('res');
      const id = await submitOne(store, newCommand(type, { maxRetry: 1 }));
      expect((await store.get(id))?.result).toBeNull();
      const first = await claimOne(store, type);
      expect(first.result).toBeNull();
      expect((await store.get(id))?.result).toBeNull();
      const failOnce = async (c: typeof first): Promise<void> => {
        const outcome = decideFailure(c, new Error('no'), new Date(), immediateBackoff);
        expect(await store.fail([{ ref: { id, token: c.claimToken }, outcome }])).toEqual([id]);
      };
      await failOnce(first);
      expect(await store.get(id)).toMatchObject({ status: 'PENDING', result: null });
      const byId = await store.claimById({ id, now: later(), token: freshToken(), leaseMs: 60_000 });
      expect(byId?.result).toBeNull();
      await failOnce(byId!);
      expect(await store.get(id)).toMatchObject({ status: 'DEAD', result: null });
      // A dead command retried and completed with a result: the result of that attempt.
      expect(E.isRight(await store.retry(id, new Date()))).toBe(true);
      const last = await claimOne(store, type);
      expect(last.result).toBeNull();
      expect(await store.complete([{ id, token: last.claimToken, resultJson: '"at last"' }])).toEqual([id]);
      expect((await store.get(id))?.result).toBe('at last');
    });

    it(`a result of exactly LIMITS.resultBytes (${LIMITS.resultBytes}) bytes is stored and read back exactly`, async () => {
      const store = ctx.store();
      const { rows } = await claimed(store, 1);
      const [c] = rows;
      const json = jsonOfBytes(LIMITS.resultBytes);
      expect(await store.complete([{ id: c!.id, token: c!.claimToken, resultJson: json }])).toEqual([c!.id]);
      const stored = (await store.get(c!.id))?.result;
      expect(typeof stored).toBe('string');
      expect(stored === JSON.parse(json)).toBe(true);
    });

    it('a retried complete that carries another result keeps the first one (a command succeeds once)', async () => {
      const store = ctx.store();
      const { rows } = await claimed(store, 1);
      const [a] = rows;
      expect(await store.complete([{ id: a!.id, token: a!.claimToken, resultJson: '"first"' }])).toEqual([
        a!.id,
      ]);
      expect(await store.complete([{ id: a!.id, token: a!.claimToken, resultJson: '"second"' }])).toEqual([
        a!.id,
      ]);
      expect((await store.get(a!.id))?.result).toBe('first');
    });

    it('a result one byte longer, not a string, or not JSON text is INVALID_ARGUMENT and nothing of the complete is written', async () => {
      const store = ctx.store();
      const { rows } = await claimed(store, 2);
      const [a, b] = rows;
      const fine = { id: a!.id, token: a!.claimToken, resultJson: '"fine"' };
      const bad: unknown[] = [
        jsonOfBytes(LIMITS.resultBytes + 1),
        42,
        { json: '{}' },
        null,
        '{"open": ',
        'NaN',
        '',
      ];
      for (const resultJson of bad) {
        const attempts = [fine, { id: b!.id, token: b!.claimToken, resultJson }] as CompletedAttempt[];
        expect(await rejectionCode(store.complete(attempts))).toBe('INVALID_ARGUMENT');
      }
      for (const c of [a!, b!])
        expect(await store.get(c.id)).toMatchObject({ status: 'RUNNING', result: null });
      expect(await store.complete([fine, { id: b!.id, token: b!.claimToken }])).toEqual([a!.id, b!.id]);
    });

    it('purge deletes results with their rows', async () => {
      const store = ctx.store();
      const { type, rows } = await claimed(store, 3);
      const ids: CommandId[] = rows.map((c) => c.id);
      expect(
        await store.complete(
          rows.map((c) => ({ id: c.id, token: c.claimToken, resultJson: `{"id": "${c.id}"}` })),
        ),
      ).toEqual(ids);
      expect((await store.get(ids[0]!))?.result).toEqual({ id: ids[0] });
      const cutoff = new Date((await store.now()).getTime() + 60_000);
      expect(
        await store.purge({ olderThan: cutoff, limit: 100, statuses: ['SUCCESS'] }),
      ).toBeGreaterThanOrEqual(3);
      expect(await store.getMany(ids)).toEqual([]);
      expect((await store.list({ type })).items).toEqual([]);
    });
  });
}
