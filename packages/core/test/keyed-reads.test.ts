import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  inTurnsWithin,
  keyedCandidatesNow,
  keyedReads,
  NO_KEY,
  type KeyedCandidate,
  type KeyedRead,
  type KeyPriorityHead,
} from '../src/store-kit/index.js';

const NOW = 1_000;

/** A keyed type's PENDING commands (due or not), the RUNNING per key, and a claim's cap and limit. */
const world = fc.record({
  commands: fc.array(
    fc.record({
      key: fc.constantFrom(NO_KEY, 'a', 'b', 'c', 'd', 'e'),
      priority: fc.integer({ min: -2, max: 2 }),
      nextRunAtMs: fc.integer({ min: 0, max: 1_200 }),
    }),
    { maxLength: 60 },
  ),
  running: fc.dictionary(fc.constantFrom('a', 'b', 'c', 'd', 'e'), fc.integer({ min: 0, max: 4 })),
  cap: fc.integer({ min: 1, max: 6 }),
  limit: fc.integer({ min: 1, max: 12 }),
  weights: fc.dictionary(fc.constantFrom('a', 'b', 'c', 'd', 'e'), fc.integer({ min: 1, max: 4 })),
});

const byClaimOrder = (a: KeyedCandidate, b: KeyedCandidate): number =>
  a.priority - b.priority ||
  a.nextRunAtMs - b.nextRunAtMs ||
  a.id.length - b.id.length ||
  (a.id < b.id ? -1 : 1);

/** What a store answers a keyed claim's reads with, from every command. */
function readerOf(all: readonly KeyedCandidate[], running: ReadonlyMap<string, number>) {
  const sorted = [...all].sort(byClaimOrder);
  const read: KeyedRead[] = [];
  return {
    read,
    reader: {
      heads: (countRunning: boolean) => {
        const first = new Map<string, KeyPriorityHead>();
        for (const c of sorted)
          if (!first.has(`${c.key}|${c.priority}`)) first.set(`${c.key}|${c.priority}`, c);
        return { heads: [...first.values()], running: countRunning ? running : new Map<string, number>() };
      },
      rows: (reads: readonly KeyedRead[]) => {
        read.push(...reads);
        return reads.flatMap((r) =>
          sorted
            .filter((c) => c.key === r.key && c.priority === r.priority && c.nextRunAtMs <= NOW)
            .slice(0, r.rows),
        );
      },
    },
  };
}

/** A keyed claim of `limit` in a world, and what ranking every due command (nothing left unread) takes. */
function claimInWorld(w: {
  commands: readonly Omit<KeyedCandidate, 'id'>[];
  running: Readonly<Record<string, number>>;
  cap: number;
  limit: number;
  weights?: Readonly<Record<string, number>>;
}) {
  const all = w.commands.map((c, i) => ({ ...c, id: String(i + 1) }));
  const runningMap = new Map(Object.entries(w.running));
  const weights = new Map(Object.entries(w.weights ?? {}));
  const { reader, read } = readerOf(all, runningMap);
  const taken = keyedCandidatesNow(reader, {
    cap: w.cap,
    limit: w.limit,
    nowMs: NOW,
    countRunning: true,
    weights,
  });
  const due = all.filter((c) => c.nextRunAtMs <= NOW);
  const everything = inTurnsWithin(due, runningMap, w.cap, w.limit, weights);
  return { all, read, taken: taken.map((c) => c.id), everything: everything.map((c) => c.id) };
}

describe('a keyed claim’s reads (core keyed-reads.ts)', () => {
  it('takes exactly what ranking every due command would take, reading at most limit·(limit+1) per priority', () => {
    fc.assert(
      fc.property(world, (w) => {
        const { all, read, taken, everything } = claimInWorld(w);
        expect(taken).toEqual(everything);
        // keyedReads' bound, limit·(limit+1)/2 per priority, twice at most: a claim that reads on
        // reads the keys it cut short again from their first row.
        const priorities = new Set(all.map((c) => c.priority)).size;
        const rows = read.reduce((n, r) => n + r.rows, 0);
        expect(rows).toBeLessThanOrEqual(priorities * w.limit * (w.limit + 1));
      }),
      { numRuns: 500 },
    );
  });

  it('weighted turns: a key of weight w takes w commands per turn, its RUNNING ones counted in them', () => {
    const all = backlog(3, () => 10);
    const weights = new Map([
      ['t-0', 3],
      ['t-1', 2],
    ]);
    const take = (running: Map<string, number>) =>
      inTurnsWithin(all, running, 1_000, 12, weights).map((c) => c.key);
    // Turn 1: three of t-0, two of t-1, one of t-2; turn 2 likewise; in claim order (ids in
    // submit order across the keys) within a turn.
    expect(take(new Map())).toEqual([
      ...['t-0', 't-1', 't-2', 't-0', 't-1', 't-0'],
      ...['t-2', 't-1', 't-0', 't-1', 't-0', 't-0'],
    ]);
    // t-0 with two RUNNING has one place left in turn 1.
    const busy = take(new Map([['t-0', 2]]));
    expect(busy.slice(0, 4).sort()).toEqual(['t-0', 't-1', 't-1', 't-2']);
    // Read through a reader, the claim takes the same.
    const { reader } = readerOf(all, new Map());
    expect(
      keyedCandidatesNow(reader, { cap: 1_000, limit: 12, nowMs: NOW, countRunning: true, weights }).map(
        (c) => c.key,
      ),
    ).toEqual(take(new Map()));
  });

  it('reads past a key at its limit, and ranks heads by turn: the key with fewer running first', () => {
    const heads: KeyPriorityHead[] = [
      { key: 'busy', priority: 0, nextRunAtMs: 1, id: '1' },
      { key: 'full', priority: 0, nextRunAtMs: 2, id: '2' },
      { key: 'idle', priority: 0, nextRunAtMs: 3, id: '3' },
      { key: 'later', priority: 0, nextRunAtMs: NOW + 1, id: '4' },
    ];
    const running = new Map([
      ['busy', 1],
      ['full', 2],
    ]);
    expect(keyedReads(heads, running, 2, 3, NOW)).toEqual([
      { key: 'idle', priority: 0, rows: 2 },
      { key: 'busy', priority: 0, rows: 1 },
    ]);
  });

  it('takes the same with many keys, long backlogs and running counts, whatever each key holds', () => {
    const keys = Array.from({ length: 30 }, (_, i) => `k${i}`);
    const wide = fc.record({
      commands: fc.array(
        fc.record({
          key: fc.constantFrom(NO_KEY, ...keys),
          priority: fc.integer({ min: 0, max: 1 }),
          nextRunAtMs: fc.integer({ min: 0, max: 1_100 }),
        }),
        { maxLength: 400 },
      ),
      running: fc.dictionary(fc.constantFrom(...keys), fc.integer({ min: 0, max: 6 })),
      cap: fc.integer({ min: 1, max: 50 }),
      limit: fc.integer({ min: 1, max: 60 }),
      weights: fc.dictionary(fc.constantFrom(...keys), fc.integer({ min: 1, max: 5 })),
    });
    fc.assert(
      fc.property(wide, (w) => {
        const { taken, everything } = claimInWorld(w);
        expect(taken).toEqual(everything);
      }),
      { numRuns: 300 },
    );
  });

  /** `perKey` due commands for each of `keys` keys, ids in submit order across them (id mod keys = key). */
  const backlog = (keys: number, perKey: (key: number) => number): KeyedCandidate[] => {
    const all: KeyedCandidate[] = [];
    const most = Math.max(...Array.from({ length: keys }, (_, k) => perKey(k)));
    for (let n = 0; n < most; n++)
      for (let k = 0; k < keys; k++)
        if (n < perKey(k))
          all.push({ key: `t-${k}`, priority: 0, nextRunAtMs: 0, id: String(all.length + 1) });
    return all;
  };

  it('reads one row per key, in one read, when 1,000 tenants each have a backlog (fair share)', () => {
    const all = backlog(1_000, () => 20);
    const running = new Map(Array.from({ length: 300 }, (_, k) => [`t-${k}`, 1] as const));
    const { reader, read } = readerOf(all, running);
    const cap = 1_000_000;
    const taken = keyedCandidatesNow(reader, { cap, limit: 500, nowMs: NOW, countRunning: true });
    expect(taken.map((c) => c.id)).toEqual(inTurnsWithin(all, running, cap, 500).map((c) => c.id));
    expect(read.reduce((n, r) => n + r.rows, 0)).toBe(500);
    expect(new Set(taken.map((c) => c.key)).size).toBe(500);
  });

  it('reads on only the keys that can give more when the others had fewer than the level', () => {
    // One tenant with a long backlog, twenty with ten each: the level (24) leaves the claim short.
    const all = backlog(21, (k) => (k === 0 ? 5_000 : 10));
    const { reader, read } = readerOf(all, new Map());
    const cap = 1_000_000;
    const taken = keyedCandidatesNow(reader, { cap, limit: 500, nowMs: NOW, countRunning: true });
    expect(taken).toHaveLength(500);
    expect(taken.map((c) => c.id)).toEqual(inTurnsWithin(all, new Map(), cap, 500).map((c) => c.id));
    const again = read.slice(21);
    expect(again.map((r) => r.key)).toEqual(['t-0']);
  });
});
