import { describe, expect, it } from 'vitest';
import { LIMITS } from '@asynccmd/core';
import type { CommandStore, PausedType, TypePauseStore } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  claim,
  newCommand,
  rejectionCode,
  submit,
  uniqueType,
  untilDatabaseClockPasses,
  useArea,
} from '../support.js';

function pausesOf<Tx>(store: CommandStore<Tx>): TypePauseStore {
  if (!store.typePauses) throw new Error(`the ${store.dialect} store keeps no type pauses`);
  return store.typePauses;
}

/** The stored pause of `type`, if any. */
async function pauseOf(pauses: TypePauseStore, type: string): Promise<PausedType | undefined> {
  return (await pauses.list()).find((p) => p.type === type);
}

/** Slack for the distance between a pause's time and the database clock read around it. */
const CLOCK_SLACK_MS = 2_000;

/**
 * The types paused for every instance: the store keeps one row per paused type (its time on the
 * database clock and the reason given) and nothing else; leaving paused types out of claims is the
 * runtime's part, so a store's claims are unchanged by them.
 */
export function typePausesArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('type pauses', () => {
    const ctx = useArea(factory, adapter, 'pause');

    it('pauses once: a second pause answers false and keeps the first time and reason', async () => {
      const store = ctx.store();
      const pauses = pausesOf(store);
      const type = uniqueType('pause');
      const before = await store.now();
      expect(await pauses.pause(type, 'deploying the payment gateway')).toBe(true);
      const after = await store.now();
      const first = await pauseOf(pauses, type);
      expect(first?.reason).toBe('deploying the payment gateway');
      expect(first?.pausedAt).toBeInstanceOf(Date);
      const at = first?.pausedAt.getTime() ?? Number.NaN;
      expect(at).toBeGreaterThanOrEqual(before.getTime() - CLOCK_SLACK_MS);
      expect(at).toBeLessThanOrEqual(after.getTime() + CLOCK_SLACK_MS);

      await untilDatabaseClockPasses(store, first!.pausedAt);
      expect(await pauses.pause(type, 'another reason')).toBe(false);
      expect(await pauses.pause(type)).toBe(false);
      const listed = (await pauses.list()).filter((p) => p.type === type);
      expect(listed).toEqual([first]);
    });

    it('resumes once: a second resume, and a resume of a type never paused, answer false', async () => {
      const pauses = pausesOf(ctx.store());
      const type = uniqueType('pause');
      await pauses.pause(type, 'r');
      expect(await pauses.resume(type)).toBe(true);
      expect(await pauseOf(pauses, type)).toBeUndefined();
      expect(await pauses.resume(type)).toBe(false);
      expect(await pauses.resume(uniqueType('never'))).toBe(false);
      // Paused again after a resume: a fresh row.
      expect(await pauses.pause(type)).toBe(true);
      expect((await pauseOf(pauses, type))?.reason).toBeNull();
    });

    it('keeps no reason as null, lists by type, and keeps types exactly (case, 128 multi-byte characters)', async () => {
      const store = ctx.store();
      const pauses = pausesOf(store);
      const base = uniqueType('order');
      const [a, b, c] = [`${base}-a`, `${base}-b`, `${base}-c`];
      await pauses.pause(c, null);
      await pauses.pause(a);
      await pauses.pause(b, 'b');
      const mine = (await pauses.list()).filter((p) => p.type.startsWith(base));
      expect(mine.map((p) => [p.type, p.reason])).toEqual([
        [a, null],
        [b, 'b'],
        [c, null],
      ]);
      const everything = (await pauses.list()).map((p) => p.type);
      expect(new Set(everything).size).toBe(everything.length);

      // 128 code points, 192 UTF-16 units, 384 UTF-8 bytes: the longest type a pause keeps.
      const longest = 'é'.repeat(64) + '😀'.repeat(64);
      expect([...longest]).toHaveLength(128);
      expect(await pauses.pause(longest, '😀'.repeat(LIMITS.pauseReasonChars))).toBe(true);
      expect((await pauseOf(pauses, longest))?.reason).toBe('😀'.repeat(LIMITS.pauseReasonChars));
      // Types differing only in case are different types, as in the command table.
      const upper = `${base}-A`;
      expect(await pauses.pause(upper)).toBe(true);
      expect(await pauseOf(pauses, upper)).toMatchObject({ type: upper, reason: null });
      expect(await pauses.resume(longest)).toBe(true);
      expect(await pauseOf(pauses, longest)).toBeUndefined();
      expect(await pauseOf(pauses, a)).toMatchObject({ type: a });
    });

    it('refuses bad input with INVALID_ARGUMENT before writing anything', async () => {
      const pauses = pausesOf(ctx.store());
      const type = uniqueType('pause');
      await pauses.pause(type, 'kept');
      const before = await pauses.list();
      const badTypes: unknown[] = [
        '',
        'x'.repeat(129),
        'é'.repeat(129),
        'a\u0000b',
        42,
        null,
        undefined,
        ['a'],
      ];
      for (const bad of badTypes) {
        expect(await rejectionCode(pauses.pause(bad as string, 'r'))).toBe('INVALID_ARGUMENT');
        expect(await rejectionCode(pauses.resume(bad as string))).toBe('INVALID_ARGUMENT');
      }
      const fresh = uniqueType('pause');
      const badReasons: unknown[] = [
        'r'.repeat(LIMITS.pauseReasonChars + 1),
        'a\u0000b',
        42,
        { text: 'r' },
        true,
      ];
      for (const bad of badReasons) {
        expect(await rejectionCode(pauses.pause(fresh, bad as string))).toBe('INVALID_ARGUMENT');
        // Refused for a type already paused too: nothing is looked up before the check.
        expect(await rejectionCode(pauses.pause(type, bad as string))).toBe('INVALID_ARGUMENT');
      }
      expect(await pauses.list()).toEqual(before);
    });

    it('stores hostile text as data', async () => {
      const store = ctx.store();
      const pauses = pausesOf(store);
      const type = `x'); DROP TABLE async_command_paused_types; -- ${uniqueType('h')}`;
      const reason = `it's "quoted" \\ back\\slash \\' \\0 %_ \`tick\` '; DELETE FROM async_command; --`;
      expect(await pauses.pause(type, reason)).toBe(true);
      expect(await pauseOf(pauses, type)).toMatchObject({ type, reason });
      expect(await pauses.resume(type)).toBe(true);
      // The store is whole: a command still goes in and out.
      const other = uniqueType('after');
      await submit(store, [newCommand(other)]);
      expect(await claim(store, other)).toHaveLength(1);
    });

    it("does not change the store's claims: the runtime leaves paused types out", async () => {
      const store = ctx.store();
      const type = uniqueType('paused');
      await submit(store, [newCommand(type)]);
      await pausesOf(store).pause(type, 'maintenance');
      // Submits of a paused type are accepted as always.
      await submit(store, [newCommand(type)]);
      const claimed = await claim(store, type);
      expect(claimed.map((c) => c.type)).toEqual([type, type]);
      // Migrating again keeps the pause.
      await store.migrate();
      expect(await pauseOf(pausesOf(store), type)).toMatchObject({ reason: 'maintenance' });
    });

    it('is shared by every instance on the database', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        const [type, raced] = [uniqueType('shared'), uniqueType('raced')];
        expect(await pausesOf(peer).pause(type, 'from the peer')).toBe(true);
        expect(await pauseOf(pausesOf(store), type)).toMatchObject({ reason: 'from the peer' });
        expect(await pausesOf(store).pause(type)).toBe(false);
        expect(await pausesOf(store).resume(type)).toBe(true);
        expect(await pauseOf(pausesOf(peer), type)).toBeUndefined();
        expect(await pausesOf(peer).resume(type)).toBe(false);
        // Both at once: exactly one of them pauses it.
        const answers = await Promise.all([
          pausesOf(store).pause(raced, 'store'),
          pausesOf(peer).pause(raced, 'peer'),
        ]);
        expect(answers.filter(Boolean)).toHaveLength(1);
        expect((await pausesOf(peer).list()).filter((p) => p.type === raced)).toHaveLength(1);
      } finally {
        await peer.close();
      }
    });
  });
}
