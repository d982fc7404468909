import type { ClaimedCommand } from '@asynccmd/core';
import { describe, expect, it } from 'vitest';
import {
  HeadSkip,
  headSkipSettings,
  LATE_COMMIT_MS,
  RECLAIM_MARGIN_MS,
  ReclaimWindow,
  type ClaimPosition,
} from '../src/store-kit/head-skip.js';

const claimed = (ids: string[], priority = 5): ClaimedCommand[] =>
  ids.map((id) => ({ id, priority, nextRunAt: new Date(Number(id)) }) as unknown as ClaimedCommand);

describe('claims past a slow head (store-kit, every database that has it)', () => {
  it('a slow claim from the head makes the next ones start at its last row, with one from the head every headEveryMs; a fast one ends it', () => {
    const skip = new HeadSkip({ slowMs: 50, headEveryMs: 1_000 });
    const types = ['noop'];
    expect(skip.startOf(types, 0)).toBeNull();
    // Fast from the head: nothing changes.
    skip.claimed(types, null, 10, claimed(['1', '2']), 10);
    expect(skip.startOf(types, 20)).toBeNull();
    // Slow from the head: the next claims start at its last row.
    skip.claimed(types, null, 80, claimed(['3', '4']), 100);
    // A second of due time before its last row: a command committed a little late is still read.
    const at: ClaimPosition | null = skip.startOf(types, 150);
    expect(at).toEqual({ priority: 5, dueAt: new Date(4 - LATE_COMMIT_MS), id: '0' });
    // A claim from there moves the position on; one that claimed nothing leaves it.
    skip.claimed(types, at, 1, claimed(['9']), 160);
    skip.claimed(types, skip.startOf(types, 170), 1, [], 170);
    expect(skip.startOf(types, 180)?.dueAt).toEqual(new Date(9 - LATE_COMMIT_MS));
    // Other types keep their own.
    expect(skip.startOf(['other'], 180)).toBeNull();
    // The next claim from the head comes headEveryMs after the last, or 20 times its length when
    // that is longer (80 ms: 1,600 ms)...
    expect(skip.startOf(types, 1_100)?.dueAt).toEqual(new Date(9 - LATE_COMMIT_MS));
    expect(skip.startOf(types, 1_700)).toBeNull();
    // ...and if that one is still slow, the skipping goes on from its last row.
    skip.claimed(types, null, 60, claimed(['12']), 1_710);
    expect(skip.startOf(types, 1_720)?.dueAt).toEqual(new Date(12 - LATE_COMMIT_MS));
    expect(skip.startOf(types, 2_900)?.dueAt).toEqual(new Date(12 - LATE_COMMIT_MS));
    // A fast one from the head ends it.
    expect(skip.startOf(types, 2_910)).toBeNull();
    skip.claimed(types, null, 5, claimed(['13']), 2_920);
    expect(skip.startOf(types, 2_930)).toBeNull();
    expect(skip.isSkipping(types)).toBe(false);
  });

  it('the reclaim reads only what lapsed since the scan before while a full scan is slow, and a full scan again at the same spacing', () => {
    const window = new ReclaimWindow({ slowMs: 50, headEveryMs: 1_000 });
    expect(window.windowOf(0)).toBeNull();
    window.scanned(null, 0, 10, 0, 100); // fast: the next is full too
    expect(window.windowOf(1_000)).toBeNull();
    window.scanned(null, 1_000, 200, 3, 100); // slow: windowed for 20 × 200 ms
    expect(window.windowOf(2_000)).toBe(1_000 + RECLAIM_MARGIN_MS);
    window.scanned(1_000 + RECLAIM_MARGIN_MS, 2_000, 5, 100, 100); // hit its limit: the range stays
    expect(window.windowOf(3_000)).toBe(2_000 + RECLAIM_MARGIN_MS);
    window.scanned(2_000 + RECLAIM_MARGIN_MS, 3_000, 5, 4, 100);
    expect(window.windowOf(4_000)).toBe(1_000 + RECLAIM_MARGIN_MS);
    expect(window.windowOf(5_000)).toBeNull(); // 4,000 ms after the slow full scan
    window.scanned(null, 5_000, 20, 0, 100); // fast again: full scans from now on
    expect(window.windowOf(6_000)).toBeNull();
  });

  it('the slowHeadSkip option: false is off, missing fields take the defaults, bad values are refused', () => {
    expect(headSkipSettings(false)).toBeNull();
    expect(headSkipSettings(undefined)).toEqual({ slowMs: 50, headEveryMs: 1_000 });
    expect(headSkipSettings({ slowMs: 0 })).toEqual({ slowMs: 0, headEveryMs: 1_000 });
    expect(() => headSkipSettings({ headEveryMs: 0 })).toThrow(/slowHeadSkip.headEveryMs/);
    expect(() => headSkipSettings({ slowMs: -1 })).toThrow(/slowHeadSkip.slowMs/);
    expect(() => headSkipSettings(true as never)).toThrow(/slowHeadSkip must be false or/);
  });
});
