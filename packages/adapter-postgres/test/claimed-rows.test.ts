import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresCommandStore } from '../src/index.js';
import { command, dropSchema, openStore, uniqueSchema } from './helpers.js';

const schema = uniqueSchema('acpg_claimed');
let store: PostgresCommandStore;

beforeAll(async () => {
  store = await openStore(schema);
});

afterAll(async () => {
  await store?.close();
  await dropSchema(schema);
});

describe('the rows of a PostgreSQL claim', () => {
  it('hand out each command exactly as reading it back shows it, the values the claim wrote included', async () => {
    await store.transaction((tx) =>
      store.insert(tx, [
        command('claimed.rows', { n: 1 }, { bizKey: 'b-1', owner: 'billing', headers: { trace: 'x' } }),
        command('claimed.rows', { n: 2 }, { priority: 3, orderingKey: 'k' }),
      ]),
    );
    const token = randomUUID();
    const claimed = await store.claimDue({
      types: ['claimed.rows'],
      limit: 10,
      now: new Date(Date.now() + 1),
      token,
      leaseMs: 45_000,
      instance: 'worker-7',
    });
    expect(claimed).toHaveLength(2);
    for (const c of claimed) {
      expect(c).toMatchObject({ status: 'RUNNING', claimToken: token, claimedBy: 'worker-7' });
      expect(c.updatedAt).toEqual(c.startedAt);
      expect(c.leaseUntil!.getTime() - c.startedAt!.getTime()).toBe(45_000);
      expect(c).toEqual(await store.get(c.id));
    }
    const anonymous = await store.transaction(async (tx) => {
      await store.insert(tx, [command('claimed.anonymous')]);
      return randomUUID();
    });
    const [unnamed] = await store.claimDue({
      types: ['claimed.anonymous'],
      limit: 1,
      now: new Date(Date.now() + 1),
      token: anonymous,
      leaseMs: 1_000,
    });
    expect(unnamed).toMatchObject({ claimToken: anonymous, claimedBy: null });
    expect(unnamed).toEqual(await store.get(unnamed!.id));
  });
});
