import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PGlite } from '@electric-sql/pglite';
import { createPgliteStore } from '@asynccmd/adapter-pglite';

const command = (type: string) => ({ type, payloadJson: '{"n":1}', maxRetry: 3 });
const dirs: string[] = [];

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('the PGlite store', () => {
  it('keeps its commands in a data directory across a close and a reopen, and closes the database it opened', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'asynccmd-pglite-'));
    dirs.push(dataDir);
    const first = createPgliteStore({ dataDir });
    await first.migrate();
    const [id] = await first.transaction((tx) => first.insert(tx, [command('kept')]));
    await first.close();
    expect(first.db.closed).toBe(true);

    const again = createPgliteStore({ dataDir });
    try {
      expect((await again.get(id!))?.status).toBe('PENDING');
      expect((await again.migrationScript()).versions).toEqual([]);
    } finally {
      await again.close();
    }
  });

  it('leaves a database it was handed open, and wakes the other stores on it', async () => {
    const db = await PGlite.create();
    try {
      const [submitter, listener] = [0, 1].map(() => createPgliteStore({ db, schema: 'shared' }));
      await submitter!.migrate();
      let woken = 0;
      const stop = await listener!.wakeups.subscribe(() => (woken += 1));
      let revoked: unknown = null;
      const stopRevocations = await listener!.revocations.subscribe((r) => (revoked = r));
      const [id] = await submitter!.transaction((tx) => submitter!.insert(tx, [command('woken')]));
      submitter!.wakeups.notify();
      await expect.poll(() => woken).toBeGreaterThan(0);

      const [claimed] = await listener!.claimDue({
        types: ['woken'],
        limit: 1,
        now: new Date(Date.now() + 1000),
        token: 'tok-1',
        leaseMs: 60_000,
      });
      expect(claimed?.id).toBe(id);
      await submitter!.requeue(id!, new Date());
      await expect.poll(() => revoked).toEqual({ ref: { id, token: 'tok-1' }, by: 'requeue' });

      await stop();
      await stopRevocations();
      await Promise.all([submitter!.close(), listener!.close()]);
      expect(db.closed).toBe(false);
      expect((await db.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await db.close();
    }
  });

  it('says what it offers: no cleanup horizon (one session holds nothing back), wake-ups within the database', async () => {
    const store = createPgliteStore();
    try {
      expect(store.dialect).toBe('pglite');
      expect(store.capabilities).toMatchObject({
        wakeups: true,
        revocations: true,
        commitRiding: null,
        sqlExecutor: true,
      });
      expect(store.cleanupHorizon).toBeUndefined();
    } finally {
      await store.close();
    }
  });
});
