import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { describeMigrationSql } from './migrate-sql.suite.js';
import { cli } from './run.js';

const dir = mkdtempSync(join(tmpdir(), 'asynccmd-sql-'));
const file = join(dir, 'by-hand.db');

describeMigrationSql('SQLite', async () => {
  // An empty file is an empty database: what a DBA creates before applying the script.
  writeFileSync(file, '');
  return {
    cliArgs: ['--db', `sqlite:${file}`],
    shell: { command: 'sqlite3', args: ['-bail', file] },
    qualify: (t) => t,
    openStore: async () => createSqliteStore({ filename: file }),
    dispose: async () => rmSync(dir, { recursive: true, force: true }),
  };
});

it('a dry run on SQLite creates no file', async () => {
  const missing = join(dir, 'never.db');
  const r = await cli(['--db', `sqlite:${missing}`, 'migrate', '--print-sql']);
  expect(r.code).toBe(1);
  expect(r.err).toContain('no SQLite database');
  expect(existsSync(missing)).toBe(false);
  const blank = await cli(['--db', 'sqlite::memory:', 'migrate', '--print-sql', '--all']);
  expect(blank).toMatchObject({ code: 0, err: '' });
  expect(blank.out).toContain('CREATE TABLE IF NOT EXISTS async_command (');
});
