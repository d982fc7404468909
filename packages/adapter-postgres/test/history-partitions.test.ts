import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_PARTITIONS_AHEAD, partitionPlan, partitionWidthMs } from '@asynccmd/core/store-kit';
import { PARTITION_LOCK_TIMEOUT_MS } from '../src/history-partitions.js';
import { createPostgresStore, type PostgresCommandStore } from '../src/index.js';
import {
  adminQuery,
  command,
  DATABASE_URL,
  dropSchema,
  migrateUpTo,
  openStore,
  uniqueSchema,
} from './helpers.js';

/*
 * The history in time partitions (migration 25): the purge makes partitions ahead of the clock and
 * drops whole ones past the retention; rows no partition covers, and the history from before the
 * migration, are read as every other finished command and purged row by row.
 */

const MINUTE = 60_000;
const schema = uniqueSchema('acpg_parts');
const history = `"${schema}".async_command_history`;
let store: PostgresCommandStore;

beforeAll(async () => {
  store = await openStore(schema);
});

afterAll(async () => {
  await store?.close();
  await dropSchema(schema);
});

/** The history's partitions other than the DEFAULT one, oldest first, as [lower, upper) in ms. */
async function partitions(): Promise<{ name: string; lower: number; upper: number }[]> {
  const rows = await adminQuery<{ name: string; bound: string }>(
    `SELECT p.relname AS name, pg_get_expr(p.relpartbound, p.oid) AS bound
       FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhrelid
      WHERE i.inhparent = $1::regclass ORDER BY p.relname`,
    [history],
  );
  return rows
    .filter((r) => r.bound !== 'DEFAULT')
    .map((r) => {
      const [lower, upper] = [...r.bound.matchAll(/'([^']*)'/g)].map((m) => Date.parse(m[1]!));
      return { name: r.name, lower: lower!, upper: upper! };
    })
    .sort((a, b) => a.lower - b.lower);
}

/** Submits and completes one command of `type`: its id. */
async function finishOne(type: string): Promise<string> {
  const [id] = await store.transaction((tx) => store.insert(tx, [command(type)]));
  const [claimed] = await store.claimDue({
    types: [type],
    limit: 1,
    now: new Date(Date.now() + 1000),
    token: randomUUID(),
    leaseMs: 60_000,
  });
  expect(await store.complete([{ id: claimed!.id, token: claimed!.claimToken }])).toEqual([id]);
  return id!;
}

/** The partition (or DEFAULT, or the old history) a finished command's row is in. */
async function placeOf(id: string): Promise<string | null> {
  const [row] = await adminQuery<{ place: string }>(
    `SELECT tableoid::regclass::text AS place FROM ${history} WHERE id = $1::bigint
     UNION ALL SELECT tableoid::regclass::text FROM "${schema}".async_command_history_v1 WHERE id = $1::bigint`,
    [id],
  );
  return row?.place ?? null;
}

describe('partition plans (pure)', () => {
  it('widths: the widest dividing a day that is at most a quarter of the retention', () => {
    expect(partitionWidthMs(10 * MINUTE)).toBe(2 * MINUTE);
    expect(partitionWidthMs(MINUTE)).toBe(MINUTE);
    expect(partitionWidthMs(-5 * MINUTE)).toBe(MINUTE);
    expect(partitionWidthMs(60 * MINUTE)).toBe(15 * MINUTE);
    expect(partitionWidthMs(7 * 24 * 60 * MINUTE)).toBe(24 * 60 * MINUTE);
  });

  it('makes aligned partitions from the clock up to two hours ahead (at most MAX_PARTITIONS_AHEAD), none over a row of the DEFAULT', () => {
    const now = Date.UTC(2026, 11, 7, 3, 7, 30);
    const w = 15 * MINUTE;
    const fresh = partitionPlan([], null, now, now - 60 * MINUTE, w);
    expect(fresh.drop).toEqual([]);
    expect(fresh.make[0]).toEqual({
      lowerMs: Date.UTC(2026, 11, 7, 3, 0),
      upperMs: Date.UTC(2026, 11, 7, 3, 15),
    });
    expect(fresh.make.at(-1)!.upperMs).toBeGreaterThanOrEqual(now + 120 * MINUTE);
    expect(fresh.make.every((r) => r.upperMs - r.lowerMs === w)).toBe(true);
    // A row of the DEFAULT at 03:20 keeps the new partitions after it.
    const behindRow = partitionPlan([], Date.UTC(2026, 11, 7, 3, 20), now, now - 60 * MINUTE, w);
    expect(behindRow.make[0]!.lowerMs).toBe(Date.UTC(2026, 11, 7, 3, 30));
    // A narrow width stops MAX_PARTITIONS_AHEAD widths past the clock: the clock's partition and 24 more.
    const narrow = partitionPlan([], null, now, now - 4 * MINUTE, MINUTE).make;
    expect(narrow).toHaveLength(MAX_PARTITIONS_AHEAD + 1);
    expect(narrow.at(-1)!.upperMs).toBe(Date.UTC(2026, 11, 7, 3, 32));
    // Existing partitions: continue from the last one; drop those wholly before the cutoff.
    const existing = [
      { name: 'a', lowerMs: now - 3 * w, upperMs: now - 2 * w },
      { name: 'b', lowerMs: now - 2 * w, upperMs: now + 150 * MINUTE },
    ];
    const later = partitionPlan(existing, null, now, now - 2 * w, w);
    expect(later.drop.map((p) => p.name)).toEqual(['a']);
    expect(later.make).toEqual([]);
  });
});

describe('PostgreSQL history in time partitions', () => {
  it('migration 25 leaves a partitioned history with only its DEFAULT partition, and the old history beside it', async () => {
    const [kind] = await adminQuery<{ relkind: string }>(
      `SELECT relkind FROM pg_class WHERE oid = $1::regclass`,
      [history],
    );
    expect(kind!.relkind).toBe('p');
    expect(await partitions()).toEqual([]);
    const id = await finishOne('parts.before');
    expect(await placeOf(id)).toBe(`${schema}.async_command_h_default`);
    expect(await store.get(id)).toMatchObject({ status: 'SUCCESS', type: 'parts.before' });
  });

  it('a purge makes partitions ahead of the clock; a completion lands in the one of its finish time', async () => {
    const now = (await store.now()).getTime();
    // Nothing is old enough to go: a retention of 10 minutes, partitions 2 minutes wide.
    await store.purge({ olderThan: new Date(now - 10 * MINUTE), statuses: ['SUCCESS'], limit: 1000 });
    const made = await partitions();
    expect(made.at(-1)!.upper).toBeGreaterThanOrEqual(now + MAX_PARTITIONS_AHEAD * 2 * MINUTE);
    expect(made.at(-1)!.upper).toBeLessThanOrEqual(now + (MAX_PARTITIONS_AHEAD + 1) * 2 * MINUTE);
    expect(made.every((p) => p.upper - p.lower === 2 * MINUTE)).toBe(true);
    expect(made[0]!.lower).toBeGreaterThan(now - 2 * MINUTE);
    for (let i = 1; i < made.length; i++) expect(made[i]!.lower).toBe(made[i - 1]!.upper);
    const id = await finishOne('parts.after');
    // The partition of its finish time; the DEFAULT while that range is before the first partition
    // (the DEFAULT held a row of the same minutes when the partitions were made: they start after it).
    const [finished] = await adminQuery<{ ms: string }>(
      `SELECT (extract(epoch FROM finished_at) * 1000)::bigint AS ms FROM ${history} WHERE id = $1::bigint`,
      [id],
    );
    const covering = made.find((p) => p.lower <= Number(finished!.ms) && Number(finished!.ms) < p.upper);
    expect(await placeOf(id)).toBe(`${schema}.${covering?.name ?? 'async_command_h_default'}`);
    // A row finished later goes to its own partition.
    const ahead = made[1]!;
    await adminQuery(
      `INSERT INTO ${history} (id, type, payload, status, max_retry, next_run_at, created_at, updated_at, finished_at)
       VALUES (700000001, 'parts.ahead', '{}', 'SUCCESS', 3, now(), now(), now(), $1::timestamptz)`,
      [new Date(ahead.lower + 1000).toISOString()],
    );
    expect(await placeOf('700000001')).toBe(`${schema}.${ahead.name}`);
    // Every read finds it where it is.
    expect(await store.get(id)).toMatchObject({ status: 'SUCCESS' });
    expect((await store.list({ type: 'parts.after' })).items.map((c) => c.id)).toEqual([id]);
    // A second purge with nothing due leaves the partitions as they were.
    await store.purge({ olderThan: new Date(now - 10 * MINUTE), statuses: ['SUCCESS'], limit: 1000 });
    expect(await partitions()).toEqual(made);
  });

  it('drops whole partitions past the cutoff (counting their rows) and purges the rest row by row', async () => {
    const id = await finishOne('parts.drop');
    const holding = await placeOf(id);
    const before = await partitions();
    const now = (await store.now()).getTime();
    const cutoff = now + 5 * MINUTE;
    const purged = await store.purge({ olderThan: new Date(cutoff), statuses: ['SUCCESS'], limit: 100_000 });
    const after = await partitions();
    // Every partition ending by the cutoff is gone; those after it stay.
    expect(after.every((p) => p.upper > cutoff)).toBe(true);
    expect(before.filter((p) => p.upper > cutoff).every((p) => after.some((a) => a.name === p.name))).toBe(
      true,
    );
    expect(after.some((p) => `${schema}.${p.name}` === holding)).toBe(false);
    expect(await store.get(id)).toBeNull();
    // The rows in the DEFAULT partition went row by row; every SUCCESS finished before the cutoff is gone.
    const [left] = await adminQuery<{ n: string }>(`SELECT count(*) AS n FROM ${history}`);
    expect(Number(left!.n)).toBe(0);
    // The four finished so far: parts.before, parts.after, parts.ahead and this one.
    expect(purged).toBe(4);
  });

  it('a dropped partition takes the edges and workflow steps of its commands with it', async () => {
    const now = (await store.now()).getTime();
    await store.purge({ olderThan: new Date(now - 10 * MINUTE), statuses: ['SUCCESS'], limit: 1000 });
    const [first] = await store.transaction((tx) => store.insert(tx, [command('parts.linked')]));
    const [second] = await store.transaction((tx) =>
      store.dependencies!.insertWaiting(tx, [{ ...command('parts.linked'), dependsOn: [{ id: first! }] }]),
    );
    await store.transaction((tx) =>
      store.dependencies!.recordWorkflow(tx, 'parts-wf', [
        { name: 'first', id: first! },
        { name: 'second', id: second! },
      ]),
    );
    for (const id of [first!, second!]) {
      const claimed = await store.claimById({
        id,
        now: new Date(Date.now() + 1000),
        token: randomUUID(),
        leaseMs: 60_000,
      });
      expect(await store.complete([{ id, token: claimed!.claimToken }])).toEqual([id]);
    }
    // Both into a partition ahead of the clock (the DEFAULT takes rows before the first one).
    const ahead = (await partitions())[1]!;
    await adminQuery(`UPDATE ${history} SET finished_at = $1::timestamptz WHERE id = ANY($2::bigint[])`, [
      new Date(ahead.lower + 1000).toISOString(),
      [first, second],
    ]);
    expect(await placeOf(first!)).toBe(`${schema}.${ahead.name}`);
    const links = async () =>
      adminQuery<{ edges: string; steps: string }>(
        `SELECT (SELECT count(*) FROM "${schema}".async_command_dependencies) AS edges,
                (SELECT count(*) FROM "${schema}".async_command_workflow_steps) AS steps`,
      );
    expect(await links()).toEqual([{ edges: '1', steps: '2' }]);
    await store.purge({ olderThan: new Date(ahead.upper), statuses: ['SUCCESS'], limit: 100_000 });
    expect((await partitions()).map((p) => p.name)).not.toContain(ahead.name);
    expect(await placeOf(first!)).toBeNull();
    expect(await links()).toEqual([{ edges: '0', steps: '0' }]);
  });

  it('the history from before the migration is read and purged like the rest', async () => {
    const v1 = `"${schema}".async_command_history_v1`;
    const [row] = await adminQuery<{ id: string }>(
      `INSERT INTO ${v1} (id, type, payload, status, max_retry, next_run_at, created_at, updated_at, finished_at, claim_token)
       VALUES (900000001, 'parts.v1', '{"old":true}', 'SUCCESS', 3, now() - interval '2 days',
               now() - interval '2 days', now() - interval '2 days', now() - interval '2 days', 'old')
       RETURNING id::text AS id`,
    );
    expect(await store.get(row!.id)).toMatchObject({ status: 'SUCCESS', payload: { old: true } });
    expect((await store.list({ type: 'parts.v1' })).items).toHaveLength(1);
    expect(JSON.stringify(await store.stats(new Date()))).toContain('parts.v1');
    const now = (await store.now()).getTime();
    expect(
      await store.purge({ olderThan: new Date(now - 24 * 60 * MINUTE), statuses: ['SUCCESS'], limit: 1000 }),
    ).toBe(1);
    expect(await store.get(row!.id)).toBeNull();
  });

  it(`behind a reader that holds the history, a purge gives up its drops (after ${PARTITION_LOCK_TIMEOUT_MS} ms) and deletes row by row`, async () => {
    const own = uniqueSchema('acpg_parts_held');
    const held = await openStore(own);
    const reader = new pg.Client({ connectionString: DATABASE_URL });
    try {
      const now = (await held.now()).getTime();
      await held.purge({ olderThan: new Date(now - 10 * MINUTE), statuses: ['SUCCESS'], limit: 1000 });
      const [id] = await held.transaction((tx) => held.insert(tx, [command('parts.held')]));
      const [claimed] = await held.claimDue({
        types: ['parts.held'],
        limit: 1,
        now: new Date(Date.now() + 1000),
        token: randomUUID(),
        leaseMs: 60_000,
      });
      await held.complete([{ id: claimed!.id, token: claimed!.claimToken }]);
      const count = async (): Promise<number> => {
        const [row] = await adminQuery<{ n: string }>(
          `SELECT count(*) AS n FROM pg_inherits WHERE inhparent = '"${own}".async_command_history'::regclass`,
        );
        return Number(row!.n);
      };
      const partitionsBefore = await count();
      await reader.connect();
      await reader.query('BEGIN');
      await reader.query(`SELECT count(*) FROM "${own}".async_command_history`);
      // The drop needs the history to itself and the reader has it until it ends (after this
      // purge): the purge returns only because it gave up the drop.
      expect(
        await held.purge({ olderThan: new Date(now + 5 * MINUTE), statuses: ['SUCCESS'], limit: 1000 }),
      ).toBe(1);
      expect(await held.get(id!)).toBeNull();
      expect(await count()).toBe(partitionsBefore);
    } finally {
      await reader.query('ROLLBACK').catch(() => undefined);
      await reader.end();
      await held.close();
      await dropSchema(own);
    }
  });

  it('two stores purging at once: one maintains the partitions, neither fails', async () => {
    const other = await openStore(schema);
    try {
      const now = (await store.now()).getTime();
      const purge = { olderThan: new Date(now + 30 * MINUTE), statuses: ['SUCCESS' as const], limit: 1000 };
      await Promise.all([store.purge(purge), other.purge(purge), store.purge(purge), other.purge(purge)]);
      expect((await partitions()).every((p) => p.upper > now + 30 * MINUTE)).toBe(true);
    } finally {
      await other.close();
    }
  });
});

describe('PostgreSQL upgrade to migration 25 with a history', () => {
  it('keeps the rows of the history before it, readable, and moves new ones into partitions', async () => {
    const upgraded = uniqueSchema('acpg_parts_up');
    const old = createPostgresStore({
      connectionString: DATABASE_URL,
      schema: upgraded,
      poolConfig: { max: 2 },
    });
    try {
      await migrateUpTo(old, 24);
      await adminQuery(
        `INSERT INTO "${upgraded}".async_command_history (id, type, payload, status, max_retry, next_run_at,
                created_at, updated_at, finished_at, claim_token)
         SELECT 800000000 + s, 'up.done', json_build_object('seq', s), 'SUCCESS', 3, now(), now(), now(),
                now() - s * interval '1 second', 't'
         FROM generate_series(1, 500) s`,
      );
      await old.migrate();
      expect(await old.get('800000007')).toMatchObject({ status: 'SUCCESS', payload: { seq: 7 } });
      const listed = await old.list({ type: 'up.done', limit: 1000 });
      expect(listed.items).toHaveLength(500);
      const [kinds] = await adminQuery<{ history: string; v1: string }>(
        `SELECT (SELECT relkind FROM pg_class WHERE oid = '"${upgraded}".async_command_history'::regclass) AS history,
                (SELECT relkind FROM pg_class WHERE oid = '"${upgraded}".async_command_history_v1'::regclass) AS v1`,
      );
      expect(kinds).toEqual({ history: 'p', v1: 'r' });
    } finally {
      await old.close();
      await dropSchema(upgraded);
    }
  });
});
