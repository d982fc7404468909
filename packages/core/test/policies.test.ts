import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import {
  decideDispatch,
  describeFailure,
  exponentialBackoff,
  operationState,
  parseCommandId,
  serialisePayload,
  truncateErrorText,
} from '../src/index.js';
import { validateIdentifier } from '../src/identifier.js';

describe('BackoffPolicy', () => {
  it('is min(60 s·2ⁿ, 1 h) by default', () => {
    const b = exponentialBackoff();
    expect([0, 1, 2, 5, 6, 7, 50, 5000].map((n) => b.delayMs(n))).toEqual([
      60_000, 120_000, 240_000, 1_920_000, 3_600_000, 3_600_000, 3_600_000, 3_600_000,
    ]);
  });
  it('stays finite for huge n, and 0 with a zero base', () => {
    expect(exponentialBackoff({ baseMs: 0 }).delayMs(1023)).toBe(0);
    expect(exponentialBackoff().delayMs(1_000_000)).toBe(3_600_000);
  });
  it('jitters downwards within the configured fraction', () => {
    const b = exponentialBackoff({ baseMs: 1000, jitter: 0.5, random: () => 1 });
    expect(b.delayMs(0)).toBe(500);
  });
});

describe('dispatch policy', () => {
  it('runs SCHEDULED inline, pools the others, and lets the caller run when the pool is full', () => {
    expect(decideDispatch('SCHEDULED', { free: 3 }).kind).toBe('inline');
    expect(decideDispatch('ASYNC_POOL', { free: 1 }).kind).toBe('pool');
    expect(decideDispatch('IMMEDIATE', { free: 0 }).kind).toBe('caller-runs');
    expect(decideDispatch('ASYNC_POOL', null).kind).toBe('inline');
  });
});

describe('input validation', () => {
  it('parses ids strictly', () => {
    expect(parseCommandId('42')).toEqual(E.right('42'));
    expect(parseCommandId(7)).toEqual(E.right('7'));
    expect(parseCommandId('9223372036854775807')).toEqual(E.right('9223372036854775807'));
    for (const bad of ['0', '-1', '01', '1.5', '9223372036854775808', '1; DROP TABLE x', '', null, 1.5]) {
      const r = parseCommandId(bad);
      expect(E.isLeft(r) && r.left.code).toBe('INVALID_ID');
    }
  });
  it('refuses hostile identifiers', () => {
    expect(validateIdentifier('table', 'async_command')).toEqual(E.right('async_command'));
    for (const bad of ['x; drop table y', 'a-b', '1abc', '"q"', '', 'a'.repeat(49)]) {
      const r = validateIdentifier('table', bad);
      expect(E.isLeft(r) && r.left.code).toBe('INVALID_IDENTIFIER');
    }
  });
  it('serialises plain JSON and refuses what would not round-trip', () => {
    expect(serialisePayload({ a: [1, 'x', null], b: undefined })).toEqual(E.right('{"a":[1,"x",null]}'));
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const cases: [unknown, RegExp][] = [
      [undefined, /\$ is undefined/],
      [{ n: 10n }, /BigInt/],
      [{ f: () => 1 }, /function/],
      [cyclic, /cycle/],
      [{ x: NaN }, /NaN/],
      [new Map(), /instance of Map/],
      [[undefined], /\$\[0\] is undefined/],
    ];
    for (const [value, reason] of cases) {
      const r = serialisePayload(value);
      expect(E.isLeft(r) && r.left.code).toBe('PAYLOAD_NOT_SERIALISABLE');
      expect(E.isLeft(r) && r.left.message).toMatch(reason);
    }
    const big = serialisePayload({ s: 'x'.repeat(100) }, 50);
    expect(E.isLeft(big) && big.left.code).toBe('PAYLOAD_TOO_LARGE');
  });
});

describe('error text', () => {
  it('keeps the message, not the stack', () => {
    expect(describeFailure(new RangeError('out'))).toBe('RangeError: out');
    expect(describeFailure('plain')).toBe('plain');
    expect(describeFailure({ code: 1 })).toBe('{"code":1}');
  });
  it('never splits a surrogate pair', () => {
    const s = 'a'.repeat(479) + '😀' + 'tail';
    const t = truncateErrorText(s);
    expect(t.length).toBe(479);
    expect(truncateErrorText('short')).toBe('short');
  });
});

describe('operation view', () => {
  it('maps states to what an API client sees', () => {
    expect(operationState({ status: 'PENDING', retryCount: 0, rescueCount: 0 })).toBe('accepted');
    expect(operationState({ status: 'PENDING', retryCount: 1, rescueCount: 0 })).toBe('processing');
    expect(operationState({ status: 'DEAD', retryCount: 6, rescueCount: 0 })).toBe('follow_up_failed');
  });
});
