import { describe, expect, it } from 'vitest';
import {
  decideFailure,
  EARLIEST_STORED_TIME,
  immediateBackoff,
  LATEST_STORED_TIME,
  type NewCommand,
  LIMITS,
} from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  claim,
  claimOne,
  codeOf,
  freshToken,
  newCommand,
  rejectionCode,
  submit,
  submitOne,
  uniqueType,
  useArea,
} from '../support.js';

/**
 * The input rules every store holds to, whatever its database would accept: one rule on all of
 * them, refused with a typed error before any SQL runs (so it never poisons the caller's
 * transaction), and nothing of a refused batch written.
 */
export function inputArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('input rules', () => {
    const ctx = useArea(factory, adapter, 'inp');

    /** Submits `good` and `bad` in one transaction: refused as a whole, with the code returned. */
    const refusedBatch = async (type: string, bad: Partial<NewCommand>): Promise<string | undefined> => {
      const store = ctx.store();
      const code = await rejectionCode(submit(store, [newCommand(type), newCommand(type, bad)]));
      expect((await store.list({ type })).items).toEqual([]);
      return code;
    };

    it('refuses a NUL character in type, bizKey and owner, in submits and filters alike', async () => {
      const store = ctx.store();
      const type = uniqueType();
      expect(await refusedBatch(type, { bizKey: 'order\u00001' })).toBe('INVALID_ARGUMENT');
      expect(await refusedBatch(type, { owner: 'svc\u0000' })).toBe('INVALID_ARGUMENT');
      expect(await refusedBatch(type, { type: `${type}\u0000` })).toBe('INVALID_ARGUMENT');
      expect(
        await rejectionCode(
          store.transaction((tx) => store.insertIdempotent(tx, { ...newCommand(type), bizKey: 'k\u0000' })),
        ),
      ).toBe('INVALID_ARGUMENT');
      expect(await rejectionCode(store.list({ bizKey: 'order\u00001' }))).toBe('INVALID_ARGUMENT');
      expect(await rejectionCode(claim(store, [`${type}\u0000`]))).toBe('INVALID_ARGUMENT');
      // Other control characters are ordinary text.
      const id = await submitOne(store, newCommand(type, { bizKey: 'tab\there' }));
      expect((await store.get(id))?.bizKey).toBe('tab\there');
    });

    it("refuses a transaction that is not the store's handle nor an SqlExecutor, naming what it got", async () => {
      const store = ctx.store();
      const type = uniqueType();
      // null, a plain object, another library's object: what a mix-up of arguments or of ORMs passes.
      const foreign: [unknown, string][] = [
        [null, 'not null'],
        [undefined, 'not undefined'],
        [{}, 'not a plain object'],
        [new Map(), 'not a Map'],
        ['tx', 'not a string'],
      ];
      for (const [tx, named] of foreign) {
        for (const attempt of [
          () => store.insert(tx as Tx, [newCommand(type)]),
          () => store.insertIdempotent(tx as Tx, { ...newCommand(type), bizKey: 'k' }),
        ]) {
          let caught: unknown;
          try {
            await attempt();
          } catch (e) {
            caught = e;
          }
          expect(codeOf(caught), String(tx)).toBe('INVALID_ARGUMENT');
          expect((caught as Error).message).toMatch(
            /^a submit's transaction must be .+ or an SqlExecutor, not /,
          );
          expect((caught as Error).message).toContain(named);
        }
      }
      expect((await store.list({ type })).items).toEqual([]);
    });

    it('keeps NUL and lone surrogates in payload strings and keys exactly (escaped JSON); refuses a __proto__ key and an unescaped lone surrogate', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const odd = { s: 'nul \u0000 lone \uD800 \uDC00 pair 😀', ['k\u0000\uD800']: [1, '\u0000'] };
      const id = await submitOne(store, newCommand(type, { payloadJson: JSON.stringify(odd) }));
      expect((await store.get(id))?.payload).toEqual(odd);
      expect((await claimOne(store, type)).payload).toEqual(odd);
      for (const payloadJson of ['{"a":{"__proto__":{"admin":true}}}', '{"s":"\uD800"}']) {
        expect(await refusedBatch(uniqueType(), { payloadJson }), payloadJson).toBe(
          'PAYLOAD_NOT_SERIALISABLE',
        );
      }
    });

    it('keeps a runAt from 1000-01-01 to 9999-12-31 (UTC) exactly, ends included', async () => {
      const store = ctx.store();
      const type = uniqueType();
      for (const at of [EARLIEST_STORED_TIME, LATEST_STORED_TIME]) {
        const id = await submitOne(store, newCommand(type, { runAt: new Date(at) }));
        expect((await store.get(id))?.nextRunAt.getTime()).toBe(at);
      }
    });

    it('refuses a runAt outside that range before anything is written', async () => {
      const type = uniqueType();
      for (const runAt of [
        new Date(Date.UTC(-1000, 0, 1)),
        new Date(EARLIEST_STORED_TIME - 1),
        new Date(LATEST_STORED_TIME + 1),
        new Date(8.64e15),
        new Date('nope'),
      ]) {
        expect(await refusedBatch(type, { runAt }), runAt.toString()).toBe('INVALID_ARGUMENT');
      }
      // Alone, on the path that holds a single submit back until COMMIT, too.
      const store = ctx.store();
      const alone = store.transaction((tx) =>
        store.insert(tx, [newCommand(type, { runAt: new Date(-1e15) })]),
      );
      expect(await rejectionCode(alone)).toBe('INVALID_ARGUMENT');
    });

    it('refuses a retry time or an admin "now" outside the range, writing nothing', async () => {
      const store = ctx.store();
      const type = uniqueType();
      await submitOne(store, newCommand(type));
      const c = await claimOne(store, type);
      const outcome = decideFailure(
        { maxRetry: 3, retryCount: 0, retryCountAtRetry: 0 },
        new Error('x'),
        new Date(),
        immediateBackoff,
      );
      const far = { ...outcome, nextRunAt: new Date(LATEST_STORED_TIME + 1) };
      expect(
        await rejectionCode(store.fail([{ ref: { id: c.id, token: c.claimToken }, outcome: far }])),
      ).toBe('INVALID_ARGUMENT');
      expect((await store.get(c.id))?.status).toBe('RUNNING');
      expect(await rejectionCode(store.requeue(c.id, new Date(-8.64e15)))).toBe('INVALID_ARGUMENT');
      expect((await store.get(c.id))?.status).toBe('RUNNING');
    });

    it('compares with any valid instant, however far off (claims, stats, purge)', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type));
      expect(await claim(store, type, { now: new Date(-8.64e15) })).toEqual([]);
      expect((await store.stats(new Date(-8.64e15))).counts.length).toBeGreaterThan(0);
      expect((await store.stats(new Date(8.64e15))).counts.length).toBeGreaterThan(0);
      expect(
        await store.purge({ olderThan: new Date(-8.64e15), statuses: ['SUCCESS', 'CANCELLED'], limit: 10 }),
      ).toBe(0);
      const [claimed] = await claim(store, type, { now: new Date(8.64e15), token: freshToken() });
      expect(claimed?.id).toBe(id);
    });

    it(`keeps payload JSON nested ${LIMITS.payloadDepth} levels deep and refuses one level more`, async () => {
      const store = ctx.store();
      const type = uniqueType();
      const text = (depth: number) => '{"a":'.repeat(depth - 1) + '{}' + '}'.repeat(depth - 1);
      const id = await submitOne(store, newCommand(type, { payloadJson: text(LIMITS.payloadDepth) }));
      expect(JSON.stringify((await store.get(id))?.payload)).toBe(text(LIMITS.payloadDepth));
      expect(await refusedBatch(uniqueType(), { payloadJson: text(LIMITS.payloadDepth + 1) })).toBe(
        'PAYLOAD_NOT_SERIALISABLE',
      );
      expect(await refusedBatch(uniqueType(), { payloadJson: '['.repeat(30_000) + ']'.repeat(30_000) })).toBe(
        'PAYLOAD_NOT_SERIALISABLE',
      );
    });

    it('keeps headers up to the limits and refuses more, naming the limit', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const { count, nameLength, valueLength } = LIMITS.headers;
      const atLimits = {
        ...Object.fromEntries(Array.from({ length: count - 1 }, (_, i) => [`h${i}`, 'v'])),
        ['k'.repeat(nameLength)]: 'b'.repeat(valueLength),
      };
      const id = await submitOne(store, newCommand(type, { headers: atLimits }));
      expect((await store.get(id))?.headers).toEqual(atLimits);
      const overLimits: Record<string, string>[] = [
        { ...atLimits, one: 'more' },
        { ['k'.repeat(100_000)]: 'v' },
        { baggage: 'b'.repeat(valueLength + 1) },
        { a: 'é'.repeat(valueLength), b: 'é'.repeat(valueLength) },
      ];
      for (const headers of overLimits) {
        expect(await refusedBatch(uniqueType(), { headers })).toBe('INVALID_ARGUMENT');
      }
    });
  });
}
