import type pg from 'pg';
import type { CommandStore } from '@asynccmd/core';
import { postgresRuntimeHarness } from './postgres-harness.js';
import { describeTransactionalE2E } from './transactional-suite.js';

/** The effect table beside the store's, in its schema. */
function effectTable(store: CommandStore<pg.ClientBase>): string {
  const { table } = store as unknown as { table: string };
  return table.replace(/\."[^"]+"$/, '."etx_effect"');
}

describeTransactionalE2E<pg.ClientBase>(
  'postgres',
  postgresRuntimeHarness,
  {
    async create(tx, store) {
      await tx.query(
        `CREATE TABLE IF NOT EXISTS ${effectTable(store)} (command_id BIGINT NOT NULL, attempt INT NOT NULL)`,
      );
    },
    async insert(tx, store, commandId, attempt) {
      await tx.query(`INSERT INTO ${effectTable(store)} (command_id, attempt) VALUES ($1, $2)`, [
        commandId,
        attempt,
      ]);
    },
    async fail(tx) {
      await tx.query('SELECT 1 / 0');
    },
    async count(tx, store) {
      const { rows } = await tx.query<{ id: string; n: string }>(
        `SELECT command_id::text AS id, COUNT(*) AS n FROM ${effectTable(store)} GROUP BY command_id`,
      );
      return new Map(rows.map((r) => [r.id, Number(r.n)]));
    },
  },
  { oneWriter: false, connections: true, abortsOnError: true },
);
