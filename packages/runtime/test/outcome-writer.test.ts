import { describe, expect, it } from 'vitest';
import { silentLogger, type ClaimRef, type CommandEvent } from '@asynccmd/core';
import { CommandEvents } from '../src/command-events.js';
import { OutcomeWriter } from '../src/outcome-writer.js';
import { StoreOutage } from '../src/store-outage.js';
import { ref, stubStore } from './stub-store.js';

describe('OutcomeWriter', () => {
  it('coalesces completions of one turn into one statement, batches those arriving mid-write, reports fenced ones', async () => {
    const calls: ClaimRef[][] = [];
    const store = stubStore({
      complete: async (refs) => {
        calls.push([...refs]);
        await new Promise((r) => setTimeout(r, 5));
        return refs.filter((r) => r.id !== '3').map((r) => r.id);
      },
    });
    const writer = new OutcomeWriter(store, new StoreOutage(new CommandEvents(silentLogger), silentLogger));
    const first = Promise.all(['1', '2', '3', '4'].map((id) => writer.complete(ref(id))));
    // Later turns, while the first write is in flight: they go out together in the next one.
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    const second = Promise.all(['5', '6'].map((id) => writer.complete(ref(id))));
    expect(await first).toEqual([true, true, false, true]);
    expect(await second).toEqual([true, true]);
    expect(calls.map((c) => c.map((r) => r.id))).toEqual([
      ['1', '2', '3', '4'],
      ['5', '6'],
    ]);
  });

  it('a store that answers within microtasks still gets one write for what finishes in one turn', async () => {
    const calls: string[][] = [];
    const rest: Promise<unknown>[] = [];
    // Completions a few microtasks apart, as the commands of a claimed batch finish one after
    // another, arriving while (and just after) the first write is answered.
    const finishMore = async (): Promise<void> => {
      for (let i = 2; i <= 6; i++) {
        rest.push(writer.complete(ref(String(i))));
        await Promise.resolve();
        await Promise.resolve();
      }
    };
    const store = stubStore({
      complete: (refs) => {
        if (calls.push(refs.map((r) => r.id)) === 1) void finishMore();
        return Promise.resolve(refs.map((r) => r.id));
      },
    });
    const writer = new OutcomeWriter(store, new StoreOutage(new CommandEvents(silentLogger), silentLogger));
    expect(await writer.complete(ref('1'))).toBe(true);
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(await Promise.all(rest)).toEqual([true, true, true, true, true]);
    expect(calls).toEqual([['1'], ['2', '3', '4', '5', '6']]);
  });

  it('coalesces failures of one turn into one store fail call, reports fenced ones', async () => {
    const outcome = (n: number) => ({
      status: 'PENDING' as const,
      retryCount: n,
      nextRunAt: new Date(),
      lastError: `boom ${n}`,
    });
    const batches: string[][] = [];
    const many = stubStore({
      fail: async (attempts) => {
        batches.push(attempts.map((a) => `${a.ref.id}:${a.outcome.lastError}`));
        return attempts.filter((a) => a.ref.id !== '2').map((a) => a.ref.id);
      },
    });
    const outage = new StoreOutage(new CommandEvents(silentLogger), silentLogger);
    const writer = new OutcomeWriter(many, outage);
    expect(await Promise.all(['1', '2', '3'].map((id, i) => writer.fail(ref(id), outcome(i))))).toEqual([
      true,
      false,
      true,
    ]);
    expect(batches).toEqual([['1:boom 0', '2:boom 1', '3:boom 2']]);
  });

  it('retries a completion through a lost connection instead of abandoning it', async () => {
    let failures = 2;
    const store = stubStore({
      complete: async (refs) => {
        if (failures-- > 0) throw new Error('Connection terminated unexpectedly');
        return refs.map((r) => r.id);
      },
    });
    const events = new CommandEvents(silentLogger);
    const seen: CommandEvent[] = [];
    events.on((e) => seen.push(e));
    const writer = new OutcomeWriter(store, new StoreOutage(events, silentLogger));
    expect(await writer.complete(ref('7'))).toBe(true);
    expect(seen.filter((e) => e.kind === 'store-error')).toHaveLength(2);
  });
});
