import type { SqliteDatabase } from '@asynccmd/adapter-sqlite';
import { sqliteRuntimeHarness } from './sqlite-harness.js';
import { describeTransactionalE2E } from './transactional-suite.js';

describeTransactionalE2E<SqliteDatabase>(
  'sqlite',
  sqliteRuntimeHarness,
  {
    async create(tx) {
      tx.exec('CREATE TABLE IF NOT EXISTS etx_effect (command_id TEXT NOT NULL, attempt INTEGER NOT NULL)');
    },
    async insert(tx, _store, commandId, attempt) {
      tx.prepare('INSERT INTO etx_effect (command_id, attempt) VALUES (?, ?)').run(commandId, attempt);
    },
    async fail(tx) {
      tx.prepare('SELECT * FROM etx_no_such_table').all();
    },
    async count(tx) {
      const rows = tx
        .prepare('SELECT command_id AS id, COUNT(*) AS n FROM etx_effect GROUP BY command_id')
        .all() as {
        id: string;
        n: number;
      }[];
      return new Map(rows.map((r) => [r.id, Number(r.n)]));
    },
  },
  { oneWriter: true, connections: false, abortsOnError: false },
);
