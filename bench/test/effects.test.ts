import { describe, expect, it } from 'vitest';
import { countEffects, effectVerdict } from '../src/checks.js';
import { interleaveByShape } from '../src/scenarios/drain-rows.js';

const success = (seq: number) => ({ seq, status: 'SUCCESS' });

describe('countEffects', () => {
  it('counts one row per succeeded command as clean', () => {
    const c = countEffects([success(1), success(2), success(3)], [3, 1, 2]);
    expect(c).toEqual({ rows: 3, succeededWithOne: 3, doubled: 0, succeededWithout: 0, withoutSuccess: 0 });
  });

  it('finds a doubled effect, a lost one and the rows of commands that did not succeed', () => {
    const commands = [success(1), success(2), { seq: 3, status: 'PENDING' }];
    // seq 1 twice, seq 2 none, seq 3 (PENDING) one, seq 9 (no such command) one.
    const c = countEffects(commands, [1, 1, 3, 9]);
    expect(c).toEqual({ rows: 4, succeededWithOne: 0, doubled: 1, succeededWithout: 1, withoutSuccess: 2 });
  });
});

describe('effectVerdict', () => {
  const clean = countEffects([success(1), success(2)], [1, 2]);

  it('passes exactly one row per command after a complete drain', () => {
    expect(effectVerdict(2, clean, true)).toBe('effect rows 2/2, one per command ✓');
    expect(effectVerdict(2, clean, false)).toBe('effect rows 2/2, one per command');
  });

  it('passes one row per SUCCESS after a capped drain, the rest PENDING without rows', () => {
    const capped = countEffects([success(1), { seq: 2, status: 'PENDING' }], [1]);
    expect(effectVerdict(2, capped, true, false)).toBe('effect rows 1/2, one per SUCCESS ✓');
    expect(() => effectVerdict(2, capped, true, true)).toThrow(/effect check FAILED/);
  });

  it('fails a transactional drain with a doubled row, and only reports it for the others', () => {
    const doubled = countEffects([success(1), success(2)], [1, 2, 2]);
    expect(() => effectVerdict(2, doubled, true)).toThrow(/doubled 1/);
    expect(effectVerdict(2, doubled, false)).toMatch(/^effect rows 3\/2 \(.*doubled 1/);
  });
});

describe('interleaveByShape', () => {
  const row = (name: string, processes: number, concurrency: number) => ({
    name,
    shape: { processes, concurrency },
  });

  it('runs the second plan right after the first one in each shape, then its other shapes', () => {
    const first = [row('a1', 1, 1), row('b1', 1, 1), row('a10', 1, 10), row('a4', 4, 10)];
    const second = [row('e50', 1, 50), row('e10', 1, 10), row('f10', 1, 10)];
    expect(interleaveByShape(first, second).map((r) => r.name)).toEqual([
      'a1',
      'b1',
      'a10',
      'e10',
      'f10',
      'a4',
      'e50',
    ]);
  });

  it('keeps either plan alone as it is', () => {
    const plan = [row('x', 1, 10), row('y', 4, 10)];
    expect(interleaveByShape(plan, [])).toEqual(plan);
    expect(interleaveByShape([], plan)).toEqual(plan);
  });
});
