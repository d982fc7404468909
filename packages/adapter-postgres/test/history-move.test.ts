import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MOVE_BATCH, MOVE_PLAN, moveFinishedBatch } from '../src/history.js';
import { tableNames } from '../src/names.js';
import type { PostgresCommandStore } from '../src/index.js';
import { adminQuery, command, DATABASE_URL, dropSchema, openStore, uniqueSchema } from './helpers.js';

/*
 * The upgrade to migration 21 on a table that already holds many finished commands: they move to
 * the history batch by batch, and claims and completions go on while a batch holds its locks.
 */

const schema = uniqueSchema('acpg_move');
const FINISHED = 60_000;
const PENDING = 300;
let store: PostgresCommandStore;

beforeAll(async () => {
  store = await openStore(schema);
});

afterAll(async () => {
  await store?.close();
  await dropSchema(schema);
});

const table = `"${schema}".async_command`;
const history = `"${schema}".async_command_history`;

async function count(from: string, where = 'TRUE'): Promise<number> {
  const [row] = await adminQuery<{ n: string }>(`SELECT count(*) AS n FROM ${from} WHERE ${where}`);
  return Number(row!.n);
}

/** Claims and completes up to `limit` of the PENDING commands: how many it completed. */
async function drainSome(limit: number): Promise<number> {
  const claimed = await store.claimDue({
    types: ['move.pending'],
    limit,
    now: new Date(Date.now() + 1),
    token: randomUUID(),
    leaseMs: 60_000,
  });
  return (await store.complete(claimed.map((c) => ({ id: c.id, token: c.claimToken })))).length;
}

describe('PostgreSQL upgrade: finished commands move to the history in batches', () => {
  it('moves the rows finished before migration 21 while claims go on, and leaves every read as it was', async () => {
    // Rows as a store before migration 21 left them: finished in place, in the command table.
    await adminQuery(
      `INSERT INTO ${table} (type, payload, status, max_retry, next_run_at, created_at, updated_at,
                             started_at, finished_at, claim_token)
       SELECT 'move.old', json_build_object('seq', s), 'SUCCESS', 3, now() - interval '2 hours',
              now() - interval '2 hours', now() - interval '1 hour' + s * interval '1 millisecond',
              now() - interval '1 hour', now() - interval '1 hour' + s * interval '1 millisecond', 'old-token'
       FROM generate_series(1, ${FINISHED}) s`,
    );
    // Finished rows that stay where they are: one with dependants, one schedule tick.
    await adminQuery(
      `INSERT INTO ${table} (type, payload, status, max_retry, next_run_at, created_at, updated_at,
                             finished_at, has_dependants, schedule_name, schedule_tick)
       VALUES ('move.stays', '{}', 'SUCCESS', 3, now(), now(), now(), now(), TRUE, NULL, NULL),
              ('move.stays', '{}', 'SUCCESS', 3, now(), now(), now(), now(), FALSE, 'move.tick', now())`,
    );
    await store.transaction((tx) =>
      store.insert(
        tx,
        Array.from({ length: PENDING }, (_, seq) => command('move.pending', { seq })),
      ),
    );
    const [oldest] = await adminQuery<{ id: string }>(
      `SELECT id::text AS id FROM ${table} WHERE type = 'move.old' ORDER BY id LIMIT 1`,
    );
    const before = await store.get(oldest!.id);
    const statsBefore = (await store.stats(new Date())).counts;

    // One batch of the move, held open: it locks only the rows it moves, so claims and
    // completions of other commands go on meanwhile.
    const mover = new pg.Client({ connectionString: DATABASE_URL });
    await mover.connect();
    let completedDuringBatch = 0;
    try {
      await mover.query('BEGIN');
      await mover.query(MOVE_PLAN);
      const batch = await mover.query<{ moved: number }>(
        moveFinishedBatch(tableNames(schema, 'async_command')),
        [MOVE_BATCH, '-infinity'],
      );
      expect(batch.rows[0]!.moved).toBe(MOVE_BATCH);
      const locks = await adminQuery<{ mode: string }>(
        `SELECT DISTINCT mode FROM pg_locks
         WHERE pid = $1 AND locktype = 'relation' AND relation = $2::regclass ORDER BY mode`,
        [(mover as unknown as { processID: number }).processID, table],
      );
      // Row-level only: the modes every UPDATE and DELETE take, none that waits for them.
      expect(locks.map((l) => l.mode).every((m) => ['RowShareLock', 'RowExclusiveLock'].includes(m))).toBe(
        true,
      );
      completedDuringBatch = await drainSome(50);
      await mover.query('COMMIT');
    } finally {
      await mover.end();
    }
    expect(completedDuringBatch).toBe(50);

    // The rest, as migrate() runs it, while the queue drains beside it.
    let completedBeside = completedDuringBatch;
    const migrating = store.migrate();
    let migrated = false;
    void migrating.then(() => (migrated = true));
    while (!migrated) completedBeside += await drainSome(10);
    await migrating;
    while (completedBeside < PENDING) completedBeside += await drainSome(100);
    expect(completedBeside).toBe(PENDING);

    expect(await count(table, `status = 'SUCCESS' AND type = 'move.old'`)).toBe(0);
    expect(await count(history, `type = 'move.old'`)).toBe(FINISHED);
    expect(await count(table, `type = 'move.stays'`)).toBe(2);
    expect(await count(history, `type = 'move.pending'`)).toBe(PENDING);
    // Reads answer as before the move, from whichever table holds the row.
    expect(await store.get(oldest!.id)).toEqual(before);
    const statsAfter = (await store.stats(new Date())).counts;
    const successes = (counts: typeof statsBefore): Record<string, number | undefined> =>
      Object.fromEntries(counts.filter((c) => c.status === 'SUCCESS').map((c) => [c.type, c.count]));
    expect(successes(statsAfter)).toEqual({ ...successes(statsBefore), 'move.pending': PENDING });
    // Nothing left to move: another migrate() finds nothing.
    await store.migrate();
    expect(await count(history)).toBe(FINISHED + PENDING);
  });
});
