import { describe, expect, it } from 'vitest';
import type { CommandStore } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import { claimOne, newCommand, rejectionCode, submitOne, uniqueType, useArea } from '../support.js';

/** A store is usable when a command goes all the way through it. */
async function roundTrip<Tx>(store: CommandStore<Tx>): Promise<void> {
  const type = uniqueType();
  const id = await submitOne(store, newCommand(type));
  const c = await claimOne(store, type);
  expect(await store.complete([{ id, token: c.claimToken }])).toEqual([id]);
}

export function migrationArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('migrations and configuration', () => {
    const ctx = useArea(factory, adapter, 'mig');

    it('migrating again changes nothing and loses nothing', async () => {
      const store = ctx.store();
      const id = await submitOne(store, newCommand(uniqueType()));
      const before = await store.get(id);
      await store.migrate();
      await store.migrate();
      expect(await store.get(id)).toEqual(before);
      await roundTrip(store);
    });

    it('migrations run concurrently from several instances on an empty namespace all succeed', async () => {
      const stores = await Promise.all([1, 2, 3].map(() => ctx.harness().openUnmigrated()));
      try {
        await Promise.all([...stores, ...stores].map((s) => s.migrate()));
        for (const s of stores) await roundTrip(s);
        await stores[0]!.migrate();
        await roundTrip(stores[1]!);
      } finally {
        await Promise.all(stores.map((s) => s.close()));
      }
    });

    it('a hostile table name is refused with INVALID_IDENTIFIER, and nothing is touched', async () => {
      const store = ctx.store();
      const id = await submitOne(store, newCommand(uniqueType()));
      const hostile: unknown[] = [
        'async_command; DROP TABLE async_command',
        'x"; DELETE FROM async_command; --',
        "x' OR '1'='1",
        'a b',
        'schema.table',
        '1starts_with_digit',
        '',
        'a'.repeat(49),
        'naïve',
        42,
      ];
      for (const name of hostile) {
        expect(await rejectionCode(ctx.harness().openWithTable(name))).toBe('INVALID_IDENTIFIER');
      }
      expect((await store.get(id))?.status).toBe('PENDING');
      await roundTrip(store);
    });

    it('a plain identifier is accepted as table name', async () => {
      const named = await ctx.harness().openWithTable('cf_other_table');
      try {
        await named.migrate();
        await roundTrip(named);
      } finally {
        await named.close();
      }
    });
  });
}
