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

describe('a keyed claim’s reads (core keyed-reads.ts)', () => {
  it('takes exactly what ranking every due command would take, reading at most limit·(limit+1)/2 per priority', () => {
    fc.assert(
      fc.property(world, ({ commands, running, cap, limit }) => {
        const all = commands.map((c, i) => ({ ...c, id: String(i + 1) }));
        const runningMap = new Map(Object.entries(running));
        const { reader, read } = readerOf(all, runningMap);
        const taken = keyedCandidatesNow(reader, { cap, limit, nowMs: NOW, countRunning: true });
        // Every due command ranked, with nothing left unread.
        const everything = inTurnsWithin(
          all.filter((c) => c.nextRunAtMs <= NOW),
          runningMap,
          cap,
          limit,
        );
        expect(taken.map((c) => c.id)).toEqual(everything.map((c) => c.id));
        const priorities = new Set(all.map((c) => c.priority)).size;
        const rows = read.reduce((n, r) => n + r.rows, 0);
        expect(rows).toBeLessThanOrEqual(priorities * ((limit * (limit + 1)) / 2));
      }),
      { numRuns: 500 },
    );
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
});
