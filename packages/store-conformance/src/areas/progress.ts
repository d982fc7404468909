import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import { decideFailure, immediateBackoff, LIMITS } from '@asynccmd/core';
import type { CommandStore, ProgressReport } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  claimOne,
  newCommand,
  rejectionCode,
  submitAndClaim,
  submitOne,
  uniqueType,
  untilDatabaseClockPasses,
  useArea,
} from '../support.js';

/** Submits `n` commands of a fresh type and claims them under one token. */
const claimed = <Tx>(store: CommandStore<Tx>, n: number) => submitAndClaim(store, n, 'prog');

export function progressArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('progress', () => {
    const ctx = useArea(factory, adapter, 'prog');

    it('reports of running commands are written in one call and read back by get, getMany and list', async () => {
      const store = ctx.store();
      const { type, rows } = await claimed(store, 3);
      for (const c of rows) expect((await store.get(c.id))?.progress).toBeNull();
      const reports = rows.map((c, i) => ({ id: c.id, token: c.claimToken, done: i, total: 10 + i }));
      expect([...(await store.reportProgress(reports))].sort()).toEqual(rows.map((c) => c.id).sort());
      const byId = new Map((await store.getMany(rows.map((c) => c.id))).map((r) => [r.id, r.progress]));
      rows.forEach((c, i) => expect(byId.get(c.id)).toEqual({ done: i, total: 10 + i }));
      expect((await store.get(rows[2]!.id))?.progress).toEqual({ done: 2, total: 12 });
      const listed = new Map((await store.list({ type })).items.map((r) => [r.id, r.progress]));
      rows.forEach((c, i) => expect(listed.get(c.id)).toEqual({ done: i, total: 10 + i }));
    });

    it('the latest report wins: of two calls the later, of one claim twice in a call the later', async () => {
      const store = ctx.store();
      const { rows } = await claimed(store, 1);
      const c = rows[0]!;
      expect(await store.reportProgress([{ id: c.id, token: c.claimToken, done: 1, total: 4 }])).toEqual([
        c.id,
      ]);
      expect(await store.reportProgress([{ id: c.id, token: c.claimToken, done: 3, total: 4 }])).toEqual([
        c.id,
      ]);
      expect((await store.get(c.id))?.progress).toEqual({ done: 3, total: 4 });
      const twice = [
        { id: c.id, token: c.claimToken, done: 3, total: 5 },
        { id: c.id, token: c.claimToken, done: 4, total: 5 },
      ];
      expect(await store.reportProgress(twice)).toEqual([c.id]);
      expect((await store.get(c.id))?.progress).toEqual({ done: 4, total: 5 });
      // A report may go back (a total that grew, work redone): the store keeps what it is told.
      expect(await store.reportProgress([{ id: c.id, token: c.claimToken, done: 0, total: 9 }])).toEqual([
        c.id,
      ]);
      expect((await store.get(c.id))?.progress).toEqual({ done: 0, total: 9 });
    });

    it(`the largest done and total (LIMITS.progress, ${LIMITS.progress}) are stored and read back exactly`, async () => {
      const store = ctx.store();
      const { rows } = await claimed(store, 1);
      const c = rows[0]!;
      const report = { id: c.id, token: c.claimToken, done: LIMITS.progress - 1, total: LIMITS.progress };
      expect(await store.reportProgress([report])).toEqual([c.id]);
      expect((await store.get(c.id))?.progress).toEqual({
        done: LIMITS.progress - 1,
        total: LIMITS.progress,
      });
    });

    it('fenced by the claim token: a stale token, beside the live one, writes nothing and is not returned', async () => {
      const store = ctx.store();
      const { rows } = await claimed(store, 2);
      const [a, b] = rows;
      const written = await store.reportProgress([
        { id: a!.id, token: 'stale', done: 5, total: 10 },
        { id: b!.id, token: 'stale', done: 5, total: 10 },
        { id: b!.id, token: b!.claimToken, done: 1, total: 10 },
      ]);
      expect(written).toEqual([b!.id]);
      expect((await store.get(a!.id))?.progress).toBeNull();
      expect((await store.get(b!.id))?.progress).toEqual({ done: 1, total: 10 });
    });

    it("an attempt whose command was requeued and claimed again writes nothing; the new claim's reports do", async () => {
      const store = ctx.store();
      const type = uniqueType('prog');
      const id = await submitOne(store, newCommand(type));
      const old = await claimOne(store, type);
      expect(await store.reportProgress([{ id, token: old.claimToken, done: 1, total: 2 }])).toEqual([id]);
      expect(E.isRight(await store.requeue(id, new Date()))).toBe(true);
      expect(await store.reportProgress([{ id, token: old.claimToken, done: 2, total: 2 }])).toEqual([]);
      expect(await store.releaseRevoked([{ id, token: old.claimToken }])).toEqual([id]);
      const fresh = await claimOne(store, type);
      expect(await store.reportProgress([{ id, token: old.claimToken, done: 2, total: 2 }])).toEqual([]);
      // Kept from the earlier attempt until this one reports.
      expect((await store.get(id))?.progress).toEqual({ done: 1, total: 2 });
      expect(await store.reportProgress([{ id, token: fresh.claimToken, done: 0, total: 3 }])).toEqual([id]);
      expect((await store.get(id))?.progress).toEqual({ done: 0, total: 3 });
    });

    it('an attempt whose lease ran out and whose command was reclaimed writes nothing', async () => {
      const store = ctx.store();
      const type = uniqueType('prog');
      const id = await submitOne(store, newCommand(type));
      const hung = await claimOne(store, type, { leaseMs: 1 });
      await untilDatabaseClockPasses(store, hung.leaseUntil!);
      expect((await store.reclaimHung({ limit: 1000, maxRescues: 5 })).map((r) => r.id)).toContain(id);
      expect(await store.reportProgress([{ id, token: hung.claimToken, done: 1, total: 1 }])).toEqual([]);
      expect((await store.get(id))?.progress).toBeNull();
    });

    it('a finished command takes no report and keeps the last one it had; a failed attempt keeps it for the retry', async () => {
      const store = ctx.store();
      const type = uniqueType('prog');
      const id = await submitOne(store, newCommand(type, { maxRetry: 1 }));
      const first = await claimOne(store, type);
      expect(await store.reportProgress([{ id, token: first.claimToken, done: 2, total: 8 }])).toEqual([id]);
      const outcome = decideFailure(first, new Error('no'), new Date(), immediateBackoff);
      expect(await store.fail([{ ref: { id, token: first.claimToken }, outcome }])).toEqual([id]);
      expect(await store.get(id)).toMatchObject({ status: 'PENDING', progress: { done: 2, total: 8 } });
      expect(await store.reportProgress([{ id, token: first.claimToken, done: 3, total: 8 }])).toEqual([]);
      const second = await claimOne(store, type);
      expect(await store.reportProgress([{ id, token: second.claimToken, done: 8, total: 8 }])).toEqual([id]);
      expect(await store.complete([{ id, token: second.claimToken }])).toEqual([id]);
      expect(await store.reportProgress([{ id, token: second.claimToken, done: 1, total: 8 }])).toEqual([]);
      expect(await store.get(id)).toMatchObject({ status: 'SUCCESS', progress: { done: 8, total: 8 } });
    });

    it('bad input is INVALID_ARGUMENT (or INVALID_ID) and nothing of the call is written', async () => {
      const store = ctx.store();
      const { rows } = await claimed(store, 2);
      const [a, b] = rows;
      const fine = { id: a!.id, token: a!.claimToken, done: 1, total: 2 };
      const bad: [string, unknown][] = [
        ['INVALID_ARGUMENT', { done: 3, total: 2 }],
        ['INVALID_ARGUMENT', { done: -1, total: 2 }],
        ['INVALID_ARGUMENT', { done: 0.5, total: 2 }],
        ['INVALID_ARGUMENT', { done: 0, total: 0 }],
        ['INVALID_ARGUMENT', { done: 1, total: LIMITS.progress + 1 }],
        ['INVALID_ARGUMENT', { done: '1', total: 2 }],
        ['INVALID_ARGUMENT', { done: 1, total: Number.NaN }],
        ['INVALID_ARGUMENT', { done: 1, total: Number.POSITIVE_INFINITY }],
        ['INVALID_ARGUMENT', { done: 1 }],
        ['INVALID_ARGUMENT', { token: '', done: 1, total: 2 }],
        ['INVALID_ID', { id: 'x1', done: 1, total: 2 }],
      ];
      for (const [code, over] of bad) {
        const report = { id: b!.id, token: b!.claimToken, ...(over as object) } as ProgressReport;
        expect(await rejectionCode(store.reportProgress([fine, report]))).toBe(code);
      }
      expect(await rejectionCode(store.reportProgress(null as unknown as ProgressReport[]))).toBe(
        'INVALID_ARGUMENT',
      );
      for (const c of [a!, b!]) expect((await store.get(c.id))?.progress).toBeNull();
      expect(await store.reportProgress([])).toEqual([]);
      expect(await store.reportProgress([fine])).toEqual([a!.id]);
    });
  });
}
