import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { adaptiveQueueSize, movingAverage, type ClaimSizing } from '../src/index.js';
import { CLAIM_ROUNDS_QUEUED } from '../src/claim-sizing.js';
import { WAKE_PROBE_LONGEST_MS, WAKE_PROBE_SHORTEST_MS, wakeProbeDelayMs } from '../src/wake-probe.js';

const sizingArb: fc.Arbitrary<ClaimSizing> = fc.record({
  concurrency: fc.integer({ min: 1, max: 10_000 }),
  executionMs: fc.option(fc.double({ min: 0, max: 600_000, noNaN: true }), { nil: null }),
  claimRoundTripMs: fc.option(fc.double({ min: 0, max: 60_000, noNaN: true }), { nil: null }),
  limit: fc.integer({ min: 0, max: 10_000 }),
});

describe('adaptiveQueueSize', () => {
  it('is an integer between 0 and the limit', () => {
    fc.assert(
      fc.property(sizingArb, (s) => {
        const size = adaptiveQueueSize(s);
        expect(Number.isInteger(size)).toBe(true);
        expect(size).toBeGreaterThanOrEqual(0);
        expect(size).toBeLessThanOrEqual(s.limit);
      }),
    );
  });

  it('holds nothing until an execution and a claim have been measured', () => {
    fc.assert(
      fc.property(sizingArb, (s) => {
        expect(adaptiveQueueSize({ ...s, executionMs: null })).toBe(0);
        expect(adaptiveQueueSize({ ...s, claimRoundTripMs: null })).toBe(0);
      }),
    );
  });

  it('shrinks as executions get slower, and grows with the claim round trip and the slots', () => {
    const measured = sizingArb.filter((s) => s.executionMs !== null && s.claimRoundTripMs !== null);
    fc.assert(
      fc.property(measured, fc.double({ min: 1, max: 100, noNaN: true }), (s, factor) => {
        const base = adaptiveQueueSize(s);
        expect(adaptiveQueueSize({ ...s, executionMs: s.executionMs! * factor })).toBeLessThanOrEqual(base);
        expect(
          adaptiveQueueSize({ ...s, claimRoundTripMs: s.claimRoundTripMs! * factor }),
        ).toBeGreaterThanOrEqual(base);
        expect(adaptiveQueueSize({ ...s, concurrency: s.concurrency + 1 })).toBeGreaterThanOrEqual(base);
      }),
    );
  });

  it('covers the claim round trips of work the slots would start meanwhile, when under the limit', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100 }),
        fc.double({ min: 0.01, max: 1_000, noNaN: true }),
        fc.double({ min: 0.01, max: 100, noNaN: true }),
        (concurrency, executionMs, claimRoundTripMs) => {
          const size = adaptiveQueueSize({ concurrency, executionMs, claimRoundTripMs, limit: 1e9 });
          const startedMeanwhile = (concurrency / executionMs) * claimRoundTripMs * CLAIM_ROUNDS_QUEUED;
          expect(size).toBeLessThanOrEqual(startedMeanwhile);
          expect(size).toBeGreaterThan(startedMeanwhile - 1);
        },
      ),
    );
  });

  it('keeps no queue for executors slower than a claim, and a full one for no-ops', () => {
    // 10 slots of 100 ms commands, 2 ms claims: a claim round trip starts 0.2 commands.
    expect(adaptiveQueueSize({ concurrency: 10, executionMs: 100, claimRoundTripMs: 2, limit: 500 })).toBe(0);
    // One slot of 0.02 ms commands, 1 ms claims: 100 commands per claim round trip, twice over.
    expect(adaptiveQueueSize({ concurrency: 1, executionMs: 0.02, claimRoundTripMs: 1, limit: 500 })).toBe(
      100,
    );
    expect(adaptiveQueueSize({ concurrency: 1, executionMs: 0, claimRoundTripMs: 1, limit: 500 })).toBe(500);
  });
});

describe('movingAverage', () => {
  it('starts at the first sample and stays between the previous value and the sample', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        fc.double({ min: 0.001, max: 1, noNaN: true }),
        (previous, sample, weight) => {
          expect(movingAverage(null, sample, weight)).toBe(sample);
          const next = movingAverage(previous, sample, weight);
          expect(next).toBeGreaterThanOrEqual(Math.min(previous, sample) - 1e-6);
          expect(next).toBeLessThanOrEqual(Math.max(previous, sample) + 1e-6);
        },
      ),
    );
  });
});

describe('wakeProbeDelayMs', () => {
  it('probes often while the table changes, backs off to a bound when it is quiet', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1e9, noNaN: true }),
        fc.double({ min: 0, max: 1e9, noNaN: true }),
        (a, b) => {
          const [shorter, longer] = a <= b ? [a, b] : [b, a];
          const delay = wakeProbeDelayMs(shorter);
          expect(delay).toBeGreaterThanOrEqual(WAKE_PROBE_SHORTEST_MS);
          expect(delay).toBeLessThanOrEqual(WAKE_PROBE_LONGEST_MS);
          expect(wakeProbeDelayMs(longer)).toBeGreaterThanOrEqual(delay);
        },
      ),
    );
    expect(wakeProbeDelayMs(0)).toBe(WAKE_PROBE_SHORTEST_MS);
    expect(wakeProbeDelayMs(60_000)).toBe(WAKE_PROBE_LONGEST_MS);
  });
});
