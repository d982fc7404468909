import { describe, expect, it } from 'vitest';
import {
  decodeListCursor,
  encodeListCursor,
  optionalText,
  requireHeadersJson,
  requireId,
  requireInt,
  requirePayloadJson,
  requireStatuses,
  requireTypes,
} from '../src/index.js';

const code = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (e) {
    return (e as { code?: string }).code;
  }
};

describe('adapter input checks', () => {
  it('accept good input unchanged', () => {
    expect(requireId('42')).toBe('42');
    expect(requireInt('limit', 5, 0, 10)).toBe(5);
    expect(requireTypes(['a', 'b'])).toEqual(['a', 'b']);
    expect(requireStatuses('DEAD')).toEqual(['DEAD']);
    expect(optionalText('type', undefined)).toBeNull();
    expect(requirePayloadJson('{"a":1}', 100)).toBe('{"a":1}');
    expect(requireHeadersJson(undefined)).toBe('{}');
    expect(requireHeadersJson({ traceparent: 'x' })).toBe('{"traceparent":"x"}');
    const last = { createdAt: new Date(1_700_000_000_123), id: '9007199254740993' };
    expect(decodeListCursor(encodeListCursor(last))).toEqual(last);
  });

  it('refuse bad input with typed errors', () => {
    expect(code(() => requireId('1; DROP TABLE x'))).toBe('INVALID_ID');
    expect(code(() => requireInt('limit', 1.5, 0))).toBe('INVALID_ARGUMENT');
    expect(code(() => requireInt('limit', 11, 0, 10))).toBe('INVALID_ARGUMENT');
    expect(code(() => requireTypes('a'))).toBe('INVALID_ARGUMENT');
    expect(code(() => requireStatuses(['DONE']))).toBe('INVALID_ARGUMENT');
    expect(code(() => optionalText('type', 7))).toBe('INVALID_ARGUMENT');
    expect(code(() => requirePayloadJson('{', 100))).toBe('PAYLOAD_NOT_SERIALISABLE');
    expect(code(() => requirePayloadJson(undefined, 100))).toBe('PAYLOAD_NOT_SERIALISABLE');
    expect(code(() => requirePayloadJson(JSON.stringify('订'.repeat(40)), 100))).toBe('PAYLOAD_TOO_LARGE');
    expect(code(() => requireHeadersJson({ n: 1 }))).toBe('INVALID_ARGUMENT');
    expect(code(() => requireHeadersJson(['x']))).toBe('INVALID_ARGUMENT');
    expect(code(() => decodeListCursor('bm9wZQ'))).toBe('INVALID_ARGUMENT');
    expect(code(() => decodeListCursor(42))).toBe('INVALID_ARGUMENT');
    const foreign = (text: string): string => Buffer.from(text).toString('base64url');
    for (const text of [
      'id:5',
      'c1:5',
      'c1:-1:5',
      'c1:1:0',
      'c1:1.5:5',
      'c1:8640000000000001:5',
      'c1:1:5:x',
    ]) {
      expect(
        code(() => decodeListCursor(foreign(text))),
        text,
      ).toBe('INVALID_ARGUMENT');
    }
  });
});
