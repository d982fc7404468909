import type { Pool } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMysqlStore } from '../src/index.js';
import type { MysqlCommandStore } from '../src/store.js';
import { admin, freshDatabase, perProcess, poolWithSession } from './databases.js';

/**
 * DATETIME has no time zone: the store writes and reads UTC and takes the database clock from
 * UTC_TIMESTAMP(3). Here the sessions run at +09:00 and -05:00, on caller pools configured with
 * mysql2's defaults (no dateStrings, local time zone), in a process whose own zone is not UTC.
 */
describe.each(['+09:00', '-05:00'])('session time zone %s', (zone) => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let pool: Pool;
  let store: MysqlCommandStore;
  const processZone = process.env.TZ;

  beforeAll(async () => {
    process.env.TZ = 'America/Sao_Paulo';
    db = await freshDatabase(
      perProcess(`asynccmd_mysql_tz_${zone.replace(/[^0-9]/g, '')}${zone[0] === '-' ? 'w' : 'e'}`),
    );
    pool = poolWithSession(db.url, `SET time_zone = '${zone}'`, 3);
    store = await createMysqlStore({ pool, table: 'tz_commands' });
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
    await pool?.end();
    await db?.drop();
    if (processZone === undefined) delete process.env.TZ;
    else process.env.TZ = processZone;
  });

  it('the session really runs in that zone', async () => {
    const [rows] = await pool.query(
      'SELECT @@session.time_zone AS tz, TIMESTAMPDIFF(MINUTE, UTC_TIMESTAMP(), NOW()) AS shift',
    );
    const [row] = rows as { tz: string; shift: number }[];
    expect(row?.tz).toBe(zone);
    expect(Math.abs(Number(row?.shift))).toBeGreaterThanOrEqual(299);
  });

  it('times round-trip exactly and the database clock is UTC', async () => {
    const runAt = new Date(Date.UTC(2031, 0, 15, 23, 59, 58, 123));
    const before = Date.now();
    const [id] = await store.transaction((tx) =>
      store.insert(tx, [{ type: 'tz', payloadJson: '{}', maxRetry: 1, runAt }]),
    );
    const record = await store.get(id as string);
    expect(record?.nextRunAt.toISOString()).toBe(runAt.toISOString());
    // createdAt is the database clock: within a second or so of this process's clock, not hours off.
    expect(Math.abs((record?.createdAt.getTime() ?? 0) - before)).toBeLessThan(5_000);
    expect(Math.abs((await store.now()).getTime() - Date.now())).toBeLessThan(5_000);
  });

  it('a type pause is timed on the UTC database clock', async () => {
    const before = Date.now();
    expect(await store.typePauses.pause('tz.paused', 'zone')).toBe(true);
    const [paused] = (await store.typePauses.list()).filter((p) => p.type === 'tz.paused');
    expect(Math.abs((paused?.pausedAt.getTime() ?? 0) - before)).toBeLessThan(5_000);
  });

  it('due checks use the application clock at millisecond precision', async () => {
    const runAt = new Date(Date.now() + 3_600_000);
    const [id] = await store.transaction((tx) =>
      store.insert(tx, [{ type: 'due', payloadJson: '{}', maxRetry: 1, runAt }]),
    );
    const early = new Date(runAt.getTime() - 1);
    expect(
      await store.claimDue({ types: ['due'], limit: 5, now: early, token: 'early', leaseMs: 1000 }),
    ).toEqual([]);
    const claimed = await store.claimDue({
      types: ['due'],
      limit: 5,
      now: runAt,
      token: 'on-time',
      leaseMs: 60_000,
    });
    expect(claimed.map((c) => c.id)).toEqual([id]);
    // The lease is database now + leaseMs, in UTC.
    const lease = claimed[0]?.leaseUntil?.getTime() ?? 0;
    expect(Math.abs(lease - (Date.now() + 60_000))).toBeLessThan(5_000);
  });

  it('reclaim judges leases on the database clock, not shifted by the zone', async () => {
    const now = new Date(Date.now() + 1000);
    await store.transaction((tx) =>
      store.insert(tx, [
        { type: 'hung', payloadJson: '{}', maxRetry: 1 },
        { type: 'live', payloadJson: '{}', maxRetry: 1 },
      ]),
    );
    const [hung] = await store.claimDue({ types: ['hung'], limit: 1, now, token: 'h', leaseMs: 1 });
    const [live] = await store.claimDue({ types: ['live'], limit: 1, now, token: 'l', leaseMs: 60_000 });
    await new Promise((r) => setTimeout(r, 20));
    const reclaimed = await store.reclaimHung({ limit: 10, maxRescues: 3 });
    expect(reclaimed).toEqual([{ id: hung?.id, type: 'hung', status: 'PENDING' }]);
    expect((await store.get(live?.id as string))?.status).toBe('RUNNING');
    const back = await store.get(hung?.id as string);
    expect(back?.rescueCount).toBe(1);
    // Due again at database now, which the application clock already passed.
    expect(back?.nextRunAt.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
  });

  it('stores UTC text in the table, whatever the session zone', async () => {
    const runAt = new Date(Date.UTC(2030, 5, 1, 12, 0, 0, 7));
    const [id] = await store.transaction((tx) =>
      store.insert(tx, [{ type: 'raw', payloadJson: '{}', maxRetry: 1, runAt }]),
    );
    const text = await admin(async (c) => {
      const [rows] = await c.query({
        sql: `SELECT CAST(next_run_at AS CHAR) AS t FROM \`${db.url.split('/').pop()}\`.tz_commands WHERE id = ?`,
        values: [id],
      });
      return (rows as { t: string }[])[0]?.t;
    });
    expect(text).toBe('2030-06-01 12:00:00.007');
  });
});
