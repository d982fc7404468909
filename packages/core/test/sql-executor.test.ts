import { describe, expect, it } from 'vitest';
import { isSqlExecutor, rowsOfResult, TransactionExecutors } from '../src/index.js';
import { sqlTemplate } from '../src/ports/sql-executor.js';

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

describe('TransactionExecutors', () => {
  const ran: string[] = [];
  const executors = new TransactionExecutors<{ name: string }>((tx, strings) => {
    ran.push(`${tx.name}: ${strings.join('?')}`);
    return Promise.resolve([]);
  });

  it('hands out one executor per transaction, running on that transaction', async () => {
    const tx = { name: 'a' };
    expect(executors.of(tx)).toBe(executors.of(tx));
    expect(executors.of(tx).onCommit).toBeUndefined();
    await executors.of(tx).run(['SELECT ', ''], [1]);
    expect(ran).toEqual(['a: SELECT ?']);
  });

  it('calls commit listeners once the transaction resolved, and never when it rejected', async () => {
    const heard: string[] = [];
    const result = await executors.runWithCommitHooks(async (register) => {
      const tx = { name: 'b' };
      register(tx);
      executors.of(tx).onCommit?.(() => heard.push('committed'));
      expect(heard).toEqual([]);
      return 42;
    });
    expect(result).toBe(42);
    expect(heard).toEqual(['committed']);
    const rolledBack = executors.runWithCommitHooks(async (register) => {
      const tx = { name: 'c' };
      register(tx);
      executors.of(tx).onCommit?.(() => heard.push('rolled back'));
      throw new Error('rollback');
    });
    await expect(rolledBack).rejects.toThrow('rollback');
    expect(heard).toEqual(['committed']);
  });
});

describe('rowsOfResult', () => {
  it('reads the rows of node-postgres, mysql2 and plain-array results', () => {
    expect(rowsOfResult({ rows: [{ id: '1' }] })).toEqual([{ id: '1' }]);
    expect(rowsOfResult([[{ id: '2' }], []])).toEqual([{ id: '2' }]);
    expect(rowsOfResult([{ affectedRows: 1 }, undefined])).toEqual([]);
    expect(rowsOfResult([{ id: '3' }])).toEqual([{ id: '3' }]);
    expect(rowsOfResult(null)).toEqual([]);
  });
});
