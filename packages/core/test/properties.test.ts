import * as E from 'fp-ts/lib/Either.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  cancel,
  claim,
  exponentialBackoff,
  fail,
  heartbeat,
  kill,
  reclaim,
  release,
  requeue,
  retry,
  succeed,
  truncateErrorText,
  type CommandState,
} from '../src/index.js';

const now = new Date('2026-01-01T00:00:00.000Z');
const backoff = exponentialBackoff({ baseMs: 1000, capMs: 60_000 });
const MAX_RESCUES = 2;

type Op =
  | { op: 'claim' }
  | { op: 'succeed' | 'fail' | 'heartbeat' | 'release'; stale: boolean }
  | { op: 'reclaim' | 'retry' | 'requeue' | 'kill' | 'cancel' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.constant<Op>({ op: 'claim' }),
  fc.record({ op: fc.constantFrom('succeed', 'fail', 'heartbeat', 'release' as const), stale: fc.boolean() }),
  fc.record({ op: fc.constantFrom('reclaim', 'retry', 'requeue', 'kill', 'cancel' as const) }),
);

function apply(s: CommandState, o: Op, step: number): E.Either<unknown, CommandState> {
  const token = o.op !== 'claim' && 'stale' in o && o.stale ? 'stale' : (s.claimToken ?? 'none');
  switch (o.op) {
    case 'claim':
      return claim(s, `t${step}`);
    case 'succeed':
      return succeed(s, token);
    case 'fail':
      return fail(s, token, new Error('x'), now, backoff);
    case 'heartbeat':
      return heartbeat(s, token);
    case 'release':
      return release(s, token);
    case 'reclaim':
      return reclaim(s, MAX_RESCUES);
    case 'retry':
      return retry(s, now);
    case 'requeue':
      return requeue(s, now);
    case 'kill':
      return kill(s);
    case 'cancel':
      return cancel(s);
  }
}

describe('the state machine under any sequence of operations', () => {
  it('never reaches a state it forbids', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4 }), fc.array(opArb, { maxLength: 60 }), (maxRetry, ops) => {
        let s: CommandState = {
          status: 'PENDING',
          maxRetry,
          retryCount: 0,
          rescueCount: 0,
          retryCountAtRetry: 0,
          rescueCountAtRetry: 0,
          claimToken: null,
          nextRunAt: now,
          lastError: null,
        };
        ops.forEach((o, i) => {
          const before = s;
          const r = apply(s, o, i);
          if (E.isLeft(r)) return; // refused: nothing changes
          s = r.right;
          // A token exists exactly while RUNNING.
          expect(s.status === 'RUNNING').toBe(s.claimToken !== null);
          // Finished commands only move by a person's hand (retry a DEAD one).
          if (before.status === 'SUCCESS' || before.status === 'CANCELLED') expect(s).toBe(before);
          if (before.status === 'DEAD' && s !== before) expect(['retry', 'kill']).toContain(o.op);
          // Counters never go back; what counts against the limits (since the latest admin retry)
          // stays within them.
          expect(s.retryCount).toBeGreaterThanOrEqual(before.retryCount);
          expect(s.rescueCount).toBeGreaterThanOrEqual(before.rescueCount);
          expect(s.retryCount - s.retryCountAtRetry).toBeLessThanOrEqual(s.maxRetry + 1);
          expect(s.rescueCount - s.rescueCountAtRetry).toBeLessThanOrEqual(MAX_RESCUES + 1);
          if (s.status === 'PENDING')
            expect(s.retryCount - s.retryCountAtRetry).toBeLessThanOrEqual(s.maxRetry);
          // Stale tokens never change anything.
          if ('stale' in o && o.stale) throw new Error('a stale token was accepted');
        });
      }),
      { numRuns: 500 },
    );
  });
});

describe('BackoffPolicy', () => {
  it('never decreases with n and never exceeds the cap', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 600_000 }),
        fc.integer({ min: 0, max: 86_400_000 }),
        fc.nat({ max: 2000 }),
        (baseMs, capMs, n) => {
          const b = exponentialBackoff({ baseMs, capMs });
          const d = b.delayMs(n);
          expect(d).toBeLessThanOrEqual(capMs);
          expect(d).toBeGreaterThanOrEqual(0);
          expect(b.delayMs(n + 1)).toBeGreaterThanOrEqual(d);
        },
      ),
    );
  });
  it('with jitter stays within [raw·(1 − jitter), raw]', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 0.999, noNaN: true }),
        fc.nat(40),
        (jitter, r, n) => {
          const raw = exponentialBackoff().delayMs(n);
          const d = exponentialBackoff({ jitter, random: () => r }).delayMs(n);
          expect(d).toBeLessThanOrEqual(raw);
          expect(d).toBeGreaterThanOrEqual(Math.floor(raw * (1 - jitter)));
        },
      ),
    );
  });
});

describe('truncateErrorText', () => {
  it('never exceeds the limit and never splits a surrogate pair', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 700 }),
        fc.integer({ min: 0, max: 600 }),
        (s, max) => {
          const t = truncateErrorText(s, max);
          expect(t.length).toBeLessThanOrEqual(Math.max(max, 0));
          expect(s.startsWith(t)).toBe(true);
          const last = t.charCodeAt(t.length - 1);
          expect(last >= 0xd800 && last <= 0xdbff).toBe(false);
          if (s.length <= max) expect(t).toBe(s);
          else expect(t.length).toBeGreaterThanOrEqual(max - 1);
        },
      ),
      { numRuns: 1000 },
    );
  });
});
