import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MysqlCommandStore } from '../src/store.js';
import { freshDatabase, openStore, perProcess } from './databases.js';

const DATABASE = perProcess('asynccmd_mysql_outcome_refs');

/**
 * Outcome writes name their rows by id and group them by claim token: a batch mixing claim rounds
 * must still fence each ref by its own token, never by another ref's.
 */
describe('outcome writes of refs from several claim rounds', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let store: MysqlCommandStore;

  beforeAll(async () => {
    db = await freshDatabase(DATABASE);
    store = await openStore(db.url);
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  async function submit(type: string, n: number): Promise<string[]> {
    return store.transaction((tx) =>
      store.insert(
        tx,
        Array.from({ length: n }, () => ({ type, payloadJson: '{}', maxRetry: 1 })),
      ),
    );
  }

  async function claim(type: string, limit: number, token: string, leaseMs = 60_000) {
    const rows = await store.claimDue({
      types: [type],
      limit,
      now: new Date(Date.now() + 1000),
      token,
      leaseMs,
    });
    return rows.map((r) => ({ id: r.id, token }));
  }

  it('completes refs of two rounds in one call', async () => {
    await submit('two-rounds', 4);
    const first = await claim('two-rounds', 2, 'round-1');
    const second = await claim('two-rounds', 2, 'round-2');
    const all = [first[0]!, second[0]!, first[1]!, second[1]!];
    expect(await store.complete(all)).toEqual(all.map((r) => r.id));
    for (const r of all) expect((await store.get(r.id))?.status).toBe('SUCCESS');
  });

  it("a stale ref is fenced out even when its row now carries another ref's token", async () => {
    const [id] = await submit('stale-ref', 1);
    const [stale] = await claim('stale-ref', 1, 'old-round', 1);
    // The lease runs out and the command is claimed again, in a round whose other row is
    // completed in the same call as the stale ref.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const reclaimed = await store.reclaimHung({ limit: 10, maxRescues: 5 });
    expect(reclaimed.map((r) => r.id)).toEqual([id]);
    await submit('stale-ref', 1);
    const fresh = await claim('stale-ref', 2, 'new-round');
    expect(fresh.map((r) => r.id)).toContain(id);
    const other = fresh.find((r) => r.id !== id)!;
    const mine = fresh.find((r) => r.id === id)!;

    expect(await store.heartbeat([stale!, other], 60_000)).toEqual([other]);
    expect(await store.complete([stale!, other])).toEqual([other.id]);
    const row = await store.get(id!);
    expect(row?.status).toBe('RUNNING');
    expect(row?.claimToken).toBe('new-round');
    expect(await store.complete([mine])).toEqual([id]);
  });

  it('releases refs of two rounds, each under its own token', async () => {
    await submit('release-rounds', 2);
    const first = await claim('release-rounds', 1, 'release-1');
    const second = await claim('release-rounds', 1, 'release-2');
    const wrong = { id: first[0]!.id, token: 'release-2' };
    const released = await store.release([wrong, second[0]!]);
    expect(released).toEqual([second[0]!.id]);
    expect((await store.get(first[0]!.id))?.status).toBe('RUNNING');
    expect((await store.get(second[0]!.id))?.status).toBe('PENDING');
  });
});
