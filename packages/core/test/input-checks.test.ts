import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import {
  decideFailure,
  EARLIEST_STORED_TIME,
  LATEST_STORED_TIME,
  requireHeadersJson,
  requireInt,
  requireStoredTime,
  serialisePayload,
} from '../src/index.js';
import { HEADER_LIMITS } from '../src/input-checks.js';
import { MAX_PAYLOAD_DEPTH } from '../src/payload.js';
import {
  decodeListCursor,
  encodeListCursor,
  optionalText,
  requireId,
  requireInstant,
  requirePayloadJson,
  requireStatuses,
  requireToken,
  requireTypes,
} from '../src/input-checks.js';

const code = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (e) {
    return (e as { code?: string }).code ?? `uncoded ${(e as Error).name}`;
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

const refusal = (value: unknown): { code: string; message: string } | null => {
  const r = serialisePayload(value);
  return E.isLeft(r) ? { code: r.left.code, message: r.left.message } : null;
};

/** `depth` objects nested in one another: `{"a":{"a":…{}}}`. */
function nested(depth: number): unknown {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < depth; i++) value = { a: value };
  return value;
}

describe('payload walk', () => {
  it('refuses an invalid Date instead of storing null', () => {
    expect(refusal({ at: new Date('nope') })).toEqual({
      code: 'PAYLOAD_NOT_SERIALISABLE',
      message: expect.stringContaining('$.at is an invalid Date'),
    });
  });

  it('one rule per case: a Date is refused like every class instance, an undefined field is an absent one', () => {
    // A Date would reach the executor as a string its type does not say: the caller sends the string.
    expect(refusal({ at: new Date(0) })).toEqual({
      code: 'PAYLOAD_NOT_SERIALISABLE',
      message: expect.stringContaining(
        '$.at is a Date, which JSON turns into a string: send at.toISOString()',
      ),
    });
    expect(refusal(new Date(0))?.message).toContain('$ is a Date');
    expect(refusal({ at: new Map() })?.message).toContain('$.at is an instance of Map');
    // An optional field left undefined is absent, read back absent; undefined as the payload, or in an
    // array (JSON would write null), is refused.
    expect(serialisePayload({ u: undefined, n: 1 })).toEqual(E.right('{"n":1}'));
    expect(refusal(undefined)?.message).toContain('$ is undefined');
    expect(refusal({ list: [1, undefined] })?.message).toContain('$.list[1] is undefined');
  });

  it('refuses a __proto__ key, in a payload and in JSON text a store is given; keeps NUL and lone surrogates, escaped', () => {
    for (const payload of [
      JSON.parse('{"a":{"__proto__":{"admin":true}}}') as unknown,
      JSON.parse('[{"__proto__":1}]') as unknown,
    ]) {
      expect(refusal(payload)).toEqual({
        code: 'PAYLOAD_NOT_SERIALISABLE',
        message: expect.stringContaining('has a "__proto__" key'),
      });
      expect(code(() => requirePayloadJson(JSON.stringify(payload), 1000))).toBe('PAYLOAD_NOT_SERIALISABLE');
    }
    // JSON.stringify escapes NUL and lone surrogates: ASCII in every store, read back the same.
    const odd = { s: 'nul \u0000 lone \uD800 \uDC00 pair 😀', ['k\u0000\uD800']: 1, proto: { __proto: 1 } };
    const json = serialisePayload(odd);
    expect(json).toEqual(
      E.right('{"s":"nul \\u0000 lone \\ud800 \\udc00 pair 😀","k\\u0000\\ud800":1,"proto":{"__proto":1}}'),
    );
    expect(JSON.parse(E.isRight(json) ? json.right : 'null')).toEqual(odd);
    expect(requirePayloadJson(E.isRight(json) ? json.right : '', 1000)).toBe(
      E.isRight(json) ? json.right : '',
    );
    // Written out raw, a lone surrogate is text UTF-8 cannot keep: refused.
    expect(code(() => requirePayloadJson('{"s":"\uD800"}', 1000))).toBe('PAYLOAD_NOT_SERIALISABLE');
  });

  it('refuses nesting deeper than MAX_PAYLOAD_DEPTH with a typed error, however deep', () => {
    expect(E.isRight(serialisePayload(nested(MAX_PAYLOAD_DEPTH)))).toBe(true);
    for (const depth of [MAX_PAYLOAD_DEPTH + 1, 100_000]) {
      expect(refusal(nested(depth))).toEqual({
        code: 'PAYLOAD_NOT_SERIALISABLE',
        message: expect.stringContaining(`nested deeper than ${MAX_PAYLOAD_DEPTH} levels`),
      });
    }
    let deepArray: unknown[] = [];
    for (let i = 0; i < 100_000; i++) deepArray = [deepArray];
    expect(refusal(deepArray)?.code).toBe('PAYLOAD_NOT_SERIALISABLE');
  });

  it('turns a throwing getter into PAYLOAD_NOT_SERIALISABLE naming the field', () => {
    const hostile = {
      ok: 1,
      get secret(): string {
        throw new Error('no access');
      },
    };
    expect(refusal({ inner: hostile })).toEqual({
      code: 'PAYLOAD_NOT_SERIALISABLE',
      message: expect.stringContaining('$.inner.secret could not be read (Error: no access)'),
    });
  });

  it('still reports the path of the first problem, in document order', () => {
    expect(refusal({ a: [1, { b: 2n }], c: undefined })?.message).toContain('$.a[1].b is a BigInt');
    const shared = { x: 1 };
    expect(serialisePayload({ a: shared, b: shared })).toEqual(E.right('{"a":{"x":1},"b":{"x":1}}'));
  });
});

describe('payload text as stores check it', () => {
  const deepText = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

  it('refuses JSON text nested deeper than MAX_PAYLOAD_DEPTH, counting only brackets outside strings', () => {
    expect(requirePayloadJson(deepText(MAX_PAYLOAD_DEPTH), 1_000_000)).toBe(deepText(MAX_PAYLOAD_DEPTH));
    expect(code(() => requirePayloadJson(deepText(MAX_PAYLOAD_DEPTH + 1), 1_000_000))).toBe(
      'PAYLOAD_NOT_SERIALISABLE',
    );
    expect(code(() => requirePayloadJson(deepText(200_000), 1_000_000))).toBe('PAYLOAD_NOT_SERIALISABLE');
    const brackets = JSON.stringify({ s: '[[[[{{{{\\"'.repeat(50) });
    expect(requirePayloadJson(brackets, 1_000_000)).toBe(brackets);
  });
});

describe('headers limits', () => {
  const { count, nameLength, valueLength, totalBytes } = HEADER_LIMITS;
  const many = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`h${i}`, 'v']));

  it('accept headers up to every limit', () => {
    expect(() => requireHeadersJson(many(count))).not.toThrow();
    expect(() => requireHeadersJson({ ['k'.repeat(nameLength)]: 'v' })).not.toThrow();
    expect(() => requireHeadersJson({ baggage: 'v'.repeat(valueLength) })).not.toThrow();
  });

  it.each([
    ['too many', many(count + 1), `at most ${count} headers`],
    ['a long name', { ['k'.repeat(nameLength + 1)]: 'v' }, `names of at most ${nameLength} characters`],
    ['a 100 KB name', { ['k'.repeat(100_000)]: 'v' }, `names of at most ${nameLength} characters`],
    ['an empty name', { '': 'v' }, 'non-empty'],
    ['a long value', { baggage: 'v'.repeat(valueLength + 1) }, `values of at most ${valueLength}`],
    [
      'too many bytes in all',
      Object.fromEntries(Array.from({ length: 3 }, (_, i) => [`h${i}`, '訂'.repeat(valueLength)])),
      `at most ${totalBytes} bytes`,
    ],
  ])('refuse %s with INVALID_ARGUMENT', (_label, headers, message) => {
    expect(code(() => requireHeadersJson(headers))).toBe('INVALID_ARGUMENT');
    expect(() => requireHeadersJson(headers)).toThrow(message);
  });
});

describe('text the stores keep or match', () => {
  it('refuses NUL in text columns, tokens and type filters (PostgreSQL text cannot hold it)', () => {
    expect(code(() => optionalText('bizKey', 'a\u0000b'))).toBe('INVALID_ARGUMENT');
    expect(code(() => requireToken('tok\u0000'))).toBe('INVALID_ARGUMENT');
    expect(code(() => requireTypes(['a', 'b\u0000']))).toBe('INVALID_ARGUMENT');
    expect(optionalText('bizKey', 'a\tb')).toBe('a\tb');
  });
});

describe('stored times', () => {
  const earliest = new Date(EARLIEST_STORED_TIME);
  const latest = new Date(LATEST_STORED_TIME);

  it('are the years 1000 to 9999 (UTC), ends included', () => {
    expect(earliest.toISOString()).toBe('1000-01-01T00:00:00.000Z');
    expect(latest.toISOString()).toBe('9999-12-31T23:59:59.999Z');
    expect(requireStoredTime('runAt', earliest)).toBe(earliest);
    expect(requireStoredTime('runAt', latest)).toBe(latest);
  });

  it('refuse anything outside, or not a valid Date, with INVALID_ARGUMENT naming the range', () => {
    const outside = [
      new Date(EARLIEST_STORED_TIME - 1),
      new Date(LATEST_STORED_TIME + 1),
      new Date(Date.UTC(-1000, 0, 1)),
      new Date(8.64e15),
      new Date('nope'),
      '2030-01-01',
    ];
    for (const value of outside) {
      expect(code(() => requireStoredTime('runAt', value))).toBe('INVALID_ARGUMENT');
      expect(() => requireStoredTime('runAt', value)).toThrow(
        'runAt must be a valid Date from 1000-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z',
      );
    }
  });

  it('instants only compared with are clamped into the range', () => {
    expect(requireInstant('now', new Date(8.64e15)).getTime()).toBe(LATEST_STORED_TIME);
    expect(requireInstant('now', new Date(-8.64e15)).getTime()).toBe(EARLIEST_STORED_TIME);
    const now = new Date();
    expect(requireInstant('now', now)).toBe(now);
    expect(code(() => requireInstant('now', new Date(NaN)))).toBe('INVALID_ARGUMENT');
  });

  it('a backoff that answers nonsense still gives a storable retry time', () => {
    const now = new Date();
    const state = { maxRetry: 3, retryCount: 0, retryCountAtRetry: 0 };
    const at = (delay: number) =>
      decideFailure(state, new Error('x'), now, { delayMs: () => delay }).nextRunAt;
    expect(at(1e20).getTime()).toBe(LATEST_STORED_TIME);
    expect(at(Infinity).getTime()).toBe(LATEST_STORED_TIME);
    expect(at(-5).getTime()).toBe(now.getTime());
    expect(at(NaN).getTime()).toBe(now.getTime());
  });
});
