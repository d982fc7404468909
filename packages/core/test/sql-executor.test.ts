import { describe, expect, it } from 'vitest';
import { isSqlExecutor, sqlTemplate } from '../src/index.js';

describe('sqlTemplate', () => {
  it('splits numbered placeholders, repeating a value each time its number recurs', () => {
    expect(sqlTemplate('SELECT $1::json, $2 WHERE a = $1', ['x', 2], 'numbered')).toEqual({
      strings: ['SELECT ', '::json, ', ' WHERE a = ', ''],
      values: ['x', 2, 'x'],
    });
  });

  it('splits question-mark placeholders in order', () => {
    expect(sqlTemplate('INSERT INTO t VALUES (?, COALESCE(?, NOW()))', [null, 'b'], 'question-mark')).toEqual(
      {
        strings: ['INSERT INTO t VALUES (', ', COALESCE(', ', NOW()))'],
        values: [null, 'b'],
      },
    );
  });

  it('refuses a placeholder without a parameter', () => {
    expect(() => sqlTemplate('SELECT $3', ['a'], 'numbered')).toThrow(RangeError);
    expect(() => sqlTemplate('SELECT ?, ?', ['a'], 'question-mark')).toThrow(RangeError);
  });
});

describe('isSqlExecutor', () => {
  it('tells an executor from a driver client', () => {
    expect(isSqlExecutor({ kind: 'sql-executor', run: async () => [] })).toBe(true);
    expect(isSqlExecutor({ query: async () => ({ rows: [] }) })).toBe(false);
    expect(isSqlExecutor(null)).toBe(false);
  });
});
