import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { ClaimedCommand, CommandStore, CommitRiding, WakeupChannel } from '@asynccmd/core';
import type { StoreCapabilityDeclaration, StoreHarnessFactory } from '../harness.js';
import { freshToken, later, newCommand, submitOne, uniqueType, useArea } from '../support.js';

/** Waits (never asserting on time) until `check` holds, for at most `ms`. */
async function eventually(check: () => boolean, ms = 10_000): Promise<boolean> {
  for (const deadline = Date.now() + ms; !check() && Date.now() < deadline;) await sleep(5);
  return check();
}

/**
 * The capabilities a store may lack, each as its harness declares it: where declared, its area
 * runs (as River's driver test exercises the listener when the driver has one); where not, one
 * test checks that the store says so, so a gap shows in the report instead of a silent skip.
 */
export function capabilityAreas<Tx>(
  factory: StoreHarnessFactory<Tx>,
  adapter: string,
  declared: StoreCapabilityDeclaration,
): void {
  describe('declared capabilities', () => {
    const ctx = useArea(factory, adapter, 'cap');

    it(`the store offers what its harness declares: ${describeDeclaration(declared)}`, () => {
      const store = ctx.store();
      expect({
        wakeups: store.capabilities.wakeups,
        commitRiding: store.capabilities.commitRiding !== null,
        migrationScript: typeof store.migrationScript === 'function',
        cleanupHorizon: store.cleanupHorizon !== undefined,
      }).toEqual(declared);
      if (store.capabilities.wakeups) expect(store.wakeups).toBeDefined();
    });

    if (declared.wakeups) wakeupsArea(ctx);
    else
      it('wake-ups: not offered (capabilities.wakeups is false); the poll loop finds other instances’ work', () => {
        expect(ctx.store().capabilities.wakeups).toBe(false);
      });

    if (declared.commitRiding) commitRidingArea(ctx);
    else
      it('commit riding: not offered (capabilities.commitRiding is null); the runtime claims and notifies after commit', () => {
        expect(ctx.store().capabilities.commitRiding).toBeNull();
      });

    if (declared.migrationScript) migrationScriptArea(ctx);
    else
      it('migration script: not offered (store.migrationScript is absent)', () => {
        expect(ctx.store().migrationScript).toBeUndefined();
      });
  });
}

function describeDeclaration(declared: StoreCapabilityDeclaration): string {
  return Object.entries(declared)
    .map(([name, offered]) => `${offered ? '' : 'no '}${name}`)
    .join(', ');
}

type AreaContext<Tx> = ReturnType<typeof useArea<Tx>>;

/**
 * Submits on `store` and announces it (as the runtime does after commit) until `woken` holds. A
 * store whose wake-ups come from a probe of the table (MySQL's highest id) starts hearing with its
 * first probe after subscribe(): a submit before that one is not news to it, the next one is.
 */
async function wokenBySubmits<Tx>(store: CommandStore<Tx>, woken: () => boolean): Promise<boolean> {
  for (let attempt = 0; attempt < 20 && !woken(); attempt++) {
    await submitOne(store, newCommand(uniqueType('wake')));
    wakeupsOf(store).notify();
    await eventually(woken, 500);
  }
  return woken();
}

function wakeupsOf<Tx>(store: CommandStore<Tx>): WakeupChannel {
  if (store.wakeups === undefined) throw new Error('the store declares wake-ups but has no `wakeups`');
  return store.wakeups;
}

function wakeupsArea<Tx>(ctx: AreaContext<Tx>): void {
  describe('wake-ups', () => {
    it("another instance's submit and notify() wake this instance's subscribers; unsubscribed, one is woken no more", async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      try {
        let woken = 0;
        let witness = 0;
        const unsubscribe = await wakeupsOf(peer).subscribe(() => (woken += 1));
        const stopWitness = await wakeupsOf(peer).subscribe(() => (witness += 1));
        expect(await wokenBySubmits(store, () => woken > 0)).toBe(true);

        await unsubscribe();
        const before = { woken, witness };
        // The witness, still subscribed, is woken by the same delivery that would reach the other.
        expect(await wokenBySubmits(store, () => witness > before.witness)).toBe(true);
        expect(woken).toBe(before.woken);
        await stopWitness();
      } finally {
        await peer.close();
      }
    });

    it('unsubscribing twice is harmless, and a store with subscribers closes', async () => {
      const peer = await ctx.harness().openPeer();
      const unsubscribe = await wakeupsOf(peer).subscribe(() => undefined);
      await wakeupsOf(peer).subscribe(() => undefined);
      await unsubscribe();
      await unsubscribe();
      await peer.close();
    });
  });
}

function ridingOf<Tx>(store: CommandStore<Tx>): CommitRiding<Tx> {
  const riding = store.capabilities.commitRiding;
  if (riding === null) throw new Error('the store declares commit riding but has none');
  return riding;
}

function commitRidingArea<Tx>(ctx: AreaContext<Tx>): void {
  describe('commit riding', () => {
    const params = (id: string, type: string) => ({
      id,
      now: later(),
      token: freshToken(),
      leaseMs: 60_000,
      types: [type],
    });

    it('a claim by id asked for in a store transaction runs once it has committed: the command is RUNNING under its token', async () => {
      const store = ctx.store();
      const riding = ridingOf(store);
      const type = uniqueType('ride');
      let ride: Promise<ClaimedCommand | null> | null = null;
      let asked: ReturnType<typeof params> | null = null;
      let second: unknown = 'not asked';
      await store.transaction(async (tx) => {
        const [id] = await store.insert(tx, [newCommand(type)]);
        asked = params(id!, type);
        ride = riding.claimById(tx, asked);
        // One claim per transaction: a second is declined.
        second = riding.claimById(tx, params(id!, type));
      });
      expect(ride).not.toBeNull();
      expect(second).toBeNull();
      const claimed = await ride!;
      expect(claimed).toMatchObject({ id: asked!.id, status: 'RUNNING', claimToken: asked!.token });
      expect((await store.get(asked!.id))?.claimToken).toBe(asked!.token);
    });

    it('a rolled-back transaction claims nothing: the ride settles null and the command never existed', async () => {
      const store = ctx.store();
      const riding = ridingOf(store);
      const type = uniqueType('ride');
      let ride: Promise<ClaimedCommand | null> | null = null;
      const boom = new Error('rolled back');
      await expect(
        store.transaction(async (tx) => {
          const [id] = await store.insert(tx, [newCommand(type)]);
          ride = riding.claimById(tx, params(id!, type));
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(await ride).toBeNull();
      expect((await store.list({ type })).items).toEqual([]);
    });

    it('outside an open store transaction both are declined, and the caller does the work after commit', async () => {
      const store = ctx.store();
      const riding = ridingOf(store);
      const type = uniqueType('ride');
      let ended: Tx | null = null;
      const [id] = await store.transaction(async (tx) => {
        ended = tx;
        return store.insert(tx, [newCommand(type)]);
      });
      expect(riding.claimById(ended!, params(id!, type))).toBeNull();
      expect(riding.notify(ended!)).toBe(false);
      expect((await store.get(id!))?.status).toBe('PENDING');
    });

    it('notify(tx) sends the wake-up with the commit: another instance is woken, and nothing goes out for a rollback', async () => {
      const store = ctx.store();
      const riding = ridingOf(store);
      const peer = await ctx.harness().openPeer();
      try {
        let woken = 0;
        const unsubscribe = await wakeupsOf(peer).subscribe(() => (woken += 1));
        let accepted: boolean | null = null;
        await store.transaction(async (tx) => {
          await store.insert(tx, [newCommand(uniqueType('ride'))]);
          accepted = riding.notify(tx);
        });
        expect(accepted).toBe(true);
        expect(await eventually(() => woken > 0)).toBe(true);
        await unsubscribe();
      } finally {
        await peer.close();
      }
    });
  });
}

function migrationScriptArea<Tx>(ctx: AreaContext<Tx>): void {
  describe('migration script', () => {
    it('on a migrated namespace it lists nothing to run; with `all`, every version, oldest first, each recorded by its last statement', async () => {
      const script = ctx.store().migrationScript!;
      expect((await script()).versions).toEqual([]);
      const all = await script({ all: true });
      expect(all.setup.length).toBeGreaterThan(0);
      expect(typeof all.transactional).toBe('boolean');
      const versions = all.versions.map((v) => v.version);
      expect(versions.length).toBeGreaterThan(0);
      expect(versions).toEqual([...versions].sort((a, b) => a - b));
      expect(new Set(versions).size).toBe(versions.length);
      for (const step of all.versions) {
        expect(step.name.length).toBeGreaterThan(0);
        expect(step.statements.length).toBeGreaterThan(0);
        expect(step.statements.at(-1)).toMatch(new RegExp(`\\b${step.version}\\b`));
      }
    });

    it('on an unmigrated namespace it lists every version and writes nothing; once migrated, nothing', async () => {
      const [fresh, again] = [await ctx.harness().openUnmigrated(), await ctx.harness().openUnmigrated()];
      try {
        const all = await ctx.store().migrationScript!({ all: true });
        const pending = await fresh.migrationScript!();
        expect(pending.versions.map((v) => v.version)).toEqual(all.versions.map((v) => v.version));
        // Reading it applied nothing: asked again (on another instance), it is the same.
        expect((await again.migrationScript!()).versions.map((v) => v.version)).toEqual(
          pending.versions.map((v) => v.version),
        );
        await fresh.migrate();
        expect((await again.migrationScript!()).versions).toEqual([]);
      } finally {
        await Promise.all([fresh.close(), again.close()]);
      }
    });
  });
}
