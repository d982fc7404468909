import { isAsyncCommandError } from '@asynccmd/core';
import { describe, expect, it } from 'vitest';
import { bearerMatches, isLoopbackHost, validateToken } from '../../src/ops/auth.js';
import { formatDuration, parseDuration } from '../../src/ops/duration.js';
import {
  parseCursor,
  parseLimit,
  parseListQuery,
  parseReason,
  parseStatuses,
  requireCommandId,
} from '../../src/ops/validation.js';

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    return isAsyncCommandError(e) ? e.code : `not ours: ${String(e)}`;
  }
  return 'no error';
}

describe('durations', () => {
  it('parses operator durations into milliseconds', () => {
    expect(parseDuration('7d')).toBe(7 * 86_400_000);
    expect(parseDuration('12h')).toBe(12 * 3_600_000);
    expect(parseDuration('1h30m')).toBe(90 * 60_000);
    expect(parseDuration('45s')).toBe(45_000);
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('2w')).toBe(14 * 86_400_000);
  });

  it('refuses bare numbers, zero, negatives and garbage', () => {
    for (const bad of ['7', '0d', '-1d', 'd', '7 days', '', '1.5h', '7d; DROP TABLE x']) {
      expect(codeOf(() => parseDuration(bad))).toBe('INVALID_ARGUMENT');
    }
  });

  it('formats ages for people with the two largest units', () => {
    expect(formatDuration(250)).toBe('250ms');
    expect(formatDuration(65_000)).toBe('1m 5s');
    expect(formatDuration(3 * 86_400_000 + 4 * 3_600_000 + 12_000)).toBe('3d 4h');
    expect(formatDuration(86_400_000 + 5_000)).toBe('1d');
  });
});

describe('input validation', () => {
  it('accepts command ids and refuses malformed ones as INVALID_ID', () => {
    expect(requireCommandId('42')).toBe('42');
    for (const bad of ['0', '-1', 'abc', '1e3', '99999999999999999999', "1' OR '1'='1", '']) {
      expect(codeOf(() => requireCommandId(bad))).toBe('INVALID_ID');
    }
  });

  it('parses statuses case-insensitively and refuses unknown ones', () => {
    expect(parseStatuses('dead')).toEqual(['DEAD']);
    expect(parseStatuses('PENDING, running,PENDING')).toEqual(['PENDING', 'RUNNING']);
    expect(codeOf(() => parseStatuses('DEAD,ZOMBIE'))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => parseStatuses(','))).toBe('INVALID_ARGUMENT');
  });

  it('bounds limits', () => {
    expect(parseLimit('1')).toBe(1);
    expect(parseLimit('1000')).toBe(1000);
    for (const bad of ['0', '1001', '-5', 'ten', '2.5', '']) {
      expect(codeOf(() => parseLimit(bad))).toBe('INVALID_ARGUMENT');
    }
  });

  it('refuses cursors that are not printable tokens, and non-string reasons', () => {
    expect(parseCursor('abc123')).toBe('abc123');
    expect(codeOf(() => parseCursor('a b'))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => parseCursor('x'.repeat(600)))).toBe('INVALID_ARGUMENT');
    expect(parseReason(undefined)).toBeUndefined();
    expect(parseReason('operator gave up')).toBe('operator gave up');
    expect(codeOf(() => parseReason(42))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => parseReason(''))).toBe('INVALID_ARGUMENT');
  });

  it('turns a query string into a list query and refuses unknown or repeated parameters', () => {
    expect(parseListQuery(new URLSearchParams('status=dead&type=order.ship&limit=10'))).toEqual({
      status: ['DEAD'],
      type: 'order.ship',
      limit: 10,
    });
    expect(parseListQuery(new URLSearchParams(''))).toEqual({ limit: 50 });
    expect(codeOf(() => parseListQuery(new URLSearchParams('stauts=DEAD')))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => parseListQuery(new URLSearchParams('type=a&type=b')))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => parseListQuery(new URLSearchParams('type=')))).toBe('INVALID_ARGUMENT');
  });
});

describe('auth', () => {
  it('knows loopback addresses, and treats anything unsure as reachable from the network', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1']) {
      expect(isLoopbackHost(h)).toBe(true);
    }
    for (const h of ['0.0.0.0', '::', '10.0.0.5', 'example.com', '', '::ffff:10.0.0.1']) {
      expect(isLoopbackHost(h)).toBe(false);
    }
  });

  it('matches bearer tokens exactly', () => {
    const token = 'a-long-enough-token-123';
    expect(bearerMatches(`Bearer ${token}`, token)).toBe(true);
    expect(bearerMatches(`bearer ${token}`, token)).toBe(true);
    expect(bearerMatches(`Bearer ${token}x`, token)).toBe(false);
    expect(bearerMatches(token, token)).toBe(false);
    expect(bearerMatches(undefined, token)).toBe(false);
    expect(bearerMatches('Basic dXNlcjpwYXNz', token)).toBe(false);
  });

  it('refuses weak tokens', () => {
    expect(codeOf(() => validateToken('short'))).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => validateToken('has a space in the middle'))).toBe('INVALID_ARGUMENT');
    expect(validateToken('0123456789abcdef')).toBe('0123456789abcdef');
  });
});
