import { randomUUID } from 'node:crypto';
import { pgPool } from '../pg.js';
import { EFFECT_TABLE, type BenchPayload } from '../protocol.js';
import { claim, commandColumns, completeSql, type ClaimedRow } from './raw-sql-pg.js';

/**
 * The raw-SQL reference of the transactional effect drain: exactly once as asynccmd's transactional
 * executor is — each command's effect row and its fenced SUCCESS commit together — with nothing
 * but the statements. One connection claims batches of `batch` (the raw loop's claim, its commit
 * not waiting for the WAL flush, as asynccmd's hot path); each of C connections takes up to
 * RAW_EFFECT_GROUP of the claimed commands and runs them in one durable transaction, one round
 * trip each as a simple query with its value as a literal: `BEGIN; INSERT …` for the first,
 * `SAVEPOINT …; INSERT …` for the others (so one that failed could be undone alone); then the
 * fenced complete of them all (the adapter's statement, prepared) and the COMMIT, a round trip
 * each (asynccmd sends the two in one: a round trip per group the reference pays more).
 */

/** The most commands one transaction takes: asynccmd's default transactionGroupSize. */
export const RAW_EFFECT_GROUP = 32;

interface Claimed {
  readonly row: ClaimedRow;
  readonly token: string;
}

export async function rawEffectLoop(
  schema: string,
  concurrency: number,
  batch: number,
  onExecute: (payload: BenchPayload) => void,
  stopped: () => boolean,
): Promise<void> {
  const claimer = pgPool(1, true);
  const workers = pgPool(concurrency, false, true);
  try {
    const columns = await commandColumns(claimer, schema);
    const queue: Claimed[] = [];
    let claiming: Promise<number> | null = null;
    const claimMore = (): Promise<number> =>
      (claiming ??= (async () => {
        try {
          const token = randomUUID();
          const rows = await claim(claimer, schema, batch, token);
          for (const row of rows) queue.push({ row, token });
          return rows.length;
        } finally {
          claiming = null;
        }
      })());
    const complete = completeSql(schema, columns, '$1::bigint[]', '$2::text[]');
    const effect = `INSERT INTO ${schema}.${EFFECT_TABLE} (seq) VALUES `;
    const worker = async (): Promise<void> => {
      const client = await workers.connect();
      try {
        while (!stopped()) {
          // Claims ahead while the queue holds less than a batch, as a pool's adaptive queue does.
          if (queue.length < batch) void claimMore();
          if (queue.length === 0) {
            const found = await claimMore();
            if (found === 0 && queue.length === 0) await new Promise((r) => setTimeout(r, 50));
            continue;
          }
          const group = queue.splice(0, RAW_EFFECT_GROUP);
          for (const [i, { row }] of group.entries()) {
            const seq = Number(row.payload.seq);
            await client.query(`${i === 0 ? 'BEGIN' : `SAVEPOINT s${i}`}; ${effect}(${seq})`);
            onExecute(row.payload);
          }
          await client.query({
            name: 'raw_effect_complete',
            text: complete,
            values: [group.map((c) => c.row.id), group.map((c) => c.token)],
          });
          await client.query('COMMIT');
        }
      } finally {
        client.release();
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    await Promise.all([claimer.end(), workers.end()]);
  }
}
