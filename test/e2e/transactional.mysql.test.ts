import type { Connection } from 'mysql2/promise';
import { mysqlRuntimeHarness } from './mysql-harness.js';
import { describeTransactionalE2E } from './transactional-suite.js';

describeTransactionalE2E<Connection>(
  'mysql',
  mysqlRuntimeHarness,
  {
    async create(tx) {
      await tx.query(
        'CREATE TABLE IF NOT EXISTS etx_effect (command_id BIGINT NOT NULL, attempt INT NOT NULL)',
      );
    },
    async insert(tx, _store, commandId, attempt) {
      await tx.query('INSERT INTO etx_effect (command_id, attempt) VALUES (?, ?)', [commandId, attempt]);
    },
    async fail(tx) {
      await tx.query('SELECT * FROM etx_no_such_table');
    },
    async count(tx) {
      const [rows] = await tx.query(
        'SELECT CAST(command_id AS CHAR) AS id, COUNT(*) AS n FROM etx_effect GROUP BY command_id',
      );
      return new Map((rows as { id: string; n: number }[]).map((r) => [r.id, Number(r.n)]));
    },
  },
  { oneWriter: false, connections: true, abortsOnError: false },
);
