import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { CleanupHorizon } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import { newCommand, uniqueType, useArea } from '../support.js';

/** Thrown to roll the holding transaction back once the probe has seen it. */
class Released extends Error {}

/**
 * Where the store can tell what holds the database's cleanup back (`cleanupHorizon`): its answer's
 * shape, and a transaction that another instance keeps open with a write in it showing as a holder
 * at least as old as it. Other sessions of the server may hold it back longer; the probe names the
 * oldest, so only a lower bound is checked.
 */
export function cleanupHorizonArea<Tx>(
  factory: StoreHarnessFactory<Tx>,
  adapter: string,
  declared: boolean,
): void {
  describe('what holds cleanup back', () => {
    const ctx = useArea(factory, adapter, 'horizon');
    if (!declared) {
      it('not offered (store.cleanupHorizon is absent)', () => {
        expect(ctx.store().cleanupHorizon).toBeUndefined();
      });
      return;
    }

    const wellFormed = (h: CleanupHorizon) => {
      expect(h.deadRows === null || (Number.isInteger(h.deadRows) && h.deadRows >= 0)).toBe(true);
      expect(h.lastCleanupAt === null || h.lastCleanupAt instanceof Date).toBe(true);
      if (h.oldest !== null) {
        expect(['transaction', 'prepared-transaction', 'replication-slot']).toContain(h.oldest.kind);
        expect(h.oldest.heldForMs === null || h.oldest.heldForMs >= 0).toBe(true);
        expect(typeof h.oldest.description).toBe('string');
      }
    };

    it('reads a well-formed answer', async () => {
      wellFormed(await ctx.store().cleanupHorizon!.read());
    });

    it('names a transaction another instance holds open, for at least as long as it has been open', async () => {
      const store = ctx.store();
      const probe = store.cleanupHorizon!;
      const peer = await ctx.harness().openPeer();
      const holdMs = 1_200;
      let seen: CleanupHorizon | null = null;
      const held = peer.transaction(async (tx) => {
        // A write gives the transaction an id that holds cleanup back until it ends.
        await peer.insert(tx, [newCommand(uniqueType('horizon'))]);
        await sleep(holdMs);
        seen = await probe.read();
        throw new Released();
      });
      await expect(held).rejects.toBeInstanceOf(Released);
      await peer.close();
      expect(seen).not.toBeNull();
      const h = seen as unknown as CleanupHorizon;
      wellFormed(h);
      expect(h.oldest?.kind).toBe('transaction');
      expect(h.oldest?.heldForMs ?? 0).toBeGreaterThanOrEqual(holdMs - 200);
    });
  });
}
