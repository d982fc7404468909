import { describe, expect, it } from 'vitest';
import { requireTypeLimits } from '../src/input-checks.js';
import { claimWithinLimits } from '@asynccmd/core/store-kit';
import { LIMITS } from '@asynccmd/core';

/** Steps that hand out `available` rows per type and record each call. */
function steps(available: Record<string, number>) {
  const calls: string[] = [];
  const rows = (type: string, max: number) => {
    const n = Math.min(max, available[type] ?? 0);
    available[type] = (available[type] ?? 0) - n;
    return Array.from({ length: n }, () => type);
  };
  return {
    calls,
    claimLimited: async (type: string, max: number) => {
      calls.push(`limited ${type} ${max}`);
      return rows(type, max);
    },
    claimOthers: async (types: string[], max: number) => {
      calls.push(`others ${types.join(',')} ${max}`);
      return types.flatMap((t) => rows(t, max)).slice(0, max);
    },
  };
}

describe('claimWithinLimits', () => {
  it('is the plain claim without limited types among the claimed ones', async () => {
    const s = steps({ a: 5 });
    expect(await claimWithinLimits(['a'], undefined, 3, s)).toEqual(['a', 'a', 'a']);
    expect(await claimWithinLimits(['a'], ['z'], 1, s)).toEqual(['a']);
    expect(s.calls).toEqual(['others a 3', 'others a 1']);
  });

  it('claims each limited type first, in name order, then the others for what is left', async () => {
    const s = steps({ a: 5, lb: 2, la: 1 });
    expect(await claimWithinLimits(['a', 'lb', 'la'], ['lb', 'la', 'la'], 5, s)).toEqual([
      'la',
      'lb',
      'lb',
      'a',
      'a',
    ]);
    expect(s.calls).toEqual(['limited la 5', 'limited lb 4', 'others a 2']);
  });

  it('stops once the round is full', async () => {
    const s = steps({ a: 5, l: 5 });
    expect(await claimWithinLimits(['a', 'l'], ['l'], 2, s)).toEqual(['l', 'l']);
    expect(s.calls).toEqual(['limited l 2']);
  });
});

describe('requireTypeLimits', () => {
  it('accepts limits of 1 to LIMITS.typeLimit and refuses anything else with INVALID_ARGUMENT', () => {
    expect(
      requireTypeLimits([
        { type: 'a', maxRunning: 1 },
        { type: 'b', maxRunning: LIMITS.typeLimit },
      ]),
    ).toEqual([
      { type: 'a', maxRunning: 1 },
      { type: 'b', maxRunning: LIMITS.typeLimit },
    ]);
    for (const bad of [
      null,
      [null],
      [{ type: 'a', maxRunning: 0 }],
      [{ type: 'a', maxRunning: 2.5 }],
      [{ type: 'a', maxRunning: LIMITS.typeLimit + 1 }],
      [{ type: '', maxRunning: 1 }],
      [{ type: 'x'.repeat(129), maxRunning: 1 }],
      [{ type: 'a\u0000', maxRunning: 1 }],
      [
        { type: 'a', maxRunning: 1 },
        { type: 'a', maxRunning: 2 },
      ],
    ]) {
      expect(() => requireTypeLimits(bad)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
  });
});
