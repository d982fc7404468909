import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import { silentLogger, type ProgressReport } from '@asynccmd/core';
import { ProgressWriter } from '../src/progress-writer.js';
import { ref, stubStore } from './stub-store.js';

/** A store that records every reportProgress call (and answers it, or fails it). */
function recordingStore(fail = false) {
  const calls: ProgressReport[][] = [];
  const store = stubStore({
    reportProgress: async (reports) => {
      calls.push([...reports]);
      if (fail) throw new Error('the database is away');
      return reports.map((r) => r.id);
    },
  });
  return { store, calls };
}

/** Until the writer's timer (0 ms for a first report) has fired and its write has been answered. */
const turn = () => new Promise((resolve) => setTimeout(resolve, 5));

describe('ProgressWriter', () => {
  it("writes a claim's first report in the next turn, the latest of that turn only, with other claims' in one call", async () => {
    const { store, calls } = recordingStore();
    const writer = new ProgressWriter(store, silentLogger, 60_000);
    const a = { ref: ref('1') };
    const b = { ref: ref('2') };
    for (let done = 0; done <= 100; done++) writer.report(a, { done, total: 100 });
    writer.report(b, { done: 1, total: 2 });
    expect(calls).toEqual([]);
    await turn();
    expect(calls).toEqual([
      [
        { id: '1', token: 't1', done: 100, total: 100 },
        { id: '2', token: 't2', done: 1, total: 2 },
      ],
    ]);
    expect(writer.holds(a)).toBe(false);
  });

  it('writes a claim at most once an interval: a later report waits, and settle writes it before the outcome', async () => {
    const { store, calls } = recordingStore();
    const writer = new ProgressWriter(store, silentLogger, 60_000);
    const a = { ref: ref('1') };
    writer.report(a, { done: 1, total: 10 });
    await turn();
    writer.report(a, { done: 2, total: 10 });
    writer.report(a, { done: 3, total: 10 });
    await turn();
    expect(calls).toHaveLength(1);
    expect(writer.holds(a)).toBe(true);
    await writer.settle(a);
    expect(calls).toEqual([
      [{ id: '1', token: 't1', done: 1, total: 10 }],
      [{ id: '1', token: 't1', done: 3, total: 10 }],
    ]);
    expect(writer.holds(a)).toBe(false);
    // Nothing left: settling again writes nothing.
    await writer.settle(a);
    expect(calls).toHaveLength(2);
  });

  it('a report waiting for its interval goes out once the interval has passed', async () => {
    const { store, calls } = recordingStore();
    const writer = new ProgressWriter(store, silentLogger, 20);
    const a = { ref: ref('1') };
    writer.report(a, { done: 1, total: 3 });
    await turn();
    writer.report(a, { done: 2, total: 3 });
    await expect.poll(() => calls.length, { timeout: 5_000, interval: 5 }).toBe(2);
    expect(calls[1]).toEqual([{ id: '1', token: 't1', done: 2, total: 3 }]);
  });

  it('drops what a forgotten claim had not written; a failed write never throws and the next report writes again', async () => {
    const { store, calls } = recordingStore(true);
    const writer = new ProgressWriter(store, silentLogger, 60_000);
    const a = { ref: ref('1') };
    const b = { ref: ref('2') };
    writer.report(a, { done: 1, total: 2 });
    writer.forget(a);
    writer.report(b, { done: 1, total: 2 });
    await turn();
    expect(calls).toEqual([[{ id: '2', token: 't2', done: 1, total: 2 }]]);
    writer.report(b, { done: 2, total: 2 });
    await expect(writer.settle(b)).resolves.toBeUndefined();
    expect(calls).toHaveLength(2);
  });

  it('writes outside the async context of the executor that reported (a transaction it runs in)', async () => {
    const seen: unknown[] = [];
    const context = new AsyncLocalStorage<string>();
    const store = stubStore({
      reportProgress: async (reports) => {
        seen.push(context.getStore());
        return reports.map((r) => r.id);
      },
    });
    const writer = new ProgressWriter(store, silentLogger, 60_000);
    context.run('inside a transaction', () => writer.report({ ref: ref('1') }, { done: 1, total: 1 }));
    await turn();
    expect(seen).toEqual([undefined]);
  });
});
