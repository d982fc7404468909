import { describe, expect, it } from 'vitest';
import { interleavedRounds, pooledLatency, pooledRounds } from '../src/latency.js';

describe('latency rounds', () => {
  it('lets the targets take turns, each round starting with the next one', async () => {
    const order: string[] = [];
    const outcomes = await interleavedRounds(['a', 'b'], 3, async (t) => {
      order.push(t);
      return t.toUpperCase();
    });
    expect(order).toEqual(['a', 'b', 'b', 'a', 'a', 'b']);
    expect(outcomes).toEqual([{ results: ['A', 'A', 'A'] }, { results: ['B', 'B', 'B'] }]);
  });

  it('stops running a target after its failed round and keeps the others going', async () => {
    const order: string[] = [];
    let bRuns = 0;
    const outcomes = await interleavedRounds(['a', 'b'], 3, async (t) => {
      order.push(t);
      if (t === 'b' && ++bRuns === 2) throw new Error('b broke');
      return t;
    });
    expect(order).toEqual(['a', 'b', 'b', 'a', 'a']);
    expect(outcomes[0]).toEqual({ results: ['a', 'a', 'a'] });
    await expect(pooledRounds(outcomes[1]!, (r) => r.length)).rejects.toThrow('b broke');
  });

  it('pools the samples of all rounds and averages the per-command costs', () => {
    const pooled = pooledLatency([
      { samples: [1, 2], check: '2 committed', cpuUsPerCommand: 10, dbCpuUsPerCommand: 4, peakRssMb: 70 },
      { samples: [3], check: '2 committed', cpuUsPerCommand: 20, dbCpuUsPerCommand: 6, peakRssMb: 80 },
    ]);
    expect(pooled).toEqual({
      samples: [1, 2, 3],
      check: '2 rounds, each 2 committed',
      cpuUsPerCommand: 15,
      dbCpuUsPerCommand: 5,
      peakRssMb: 80,
      diagnostics: ['p50 / p99 per round: 1.00 / 2.00, 3.00 / 3.00 ms'],
    });
  });
});
