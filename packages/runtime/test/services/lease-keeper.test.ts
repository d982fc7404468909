import { describe, expect, it } from 'vitest';
import { silentLogger, type ClaimRef, type CommandEvent, type RevokedClaim } from '@asynccmd/core';
import { CommandEvents } from '../../src/command-events.js';
import { LeaseKeeper } from '../../src/services/lease-keeper.js';
import { StoreOutage } from '../../src/store-outage.js';
import { ref, stubStore } from '../stub-store.js';

describe('LeaseKeeper', () => {
  it('renews every held claim in one heartbeat per lease length and reports claims taken away', async () => {
    const calls: { refs: readonly ClaimRef[]; leaseMs: number }[] = [];
    const store = stubStore({
      heartbeat: async (refs, leaseMs) => {
        calls.push({ refs, leaseMs });
        return refs.filter((r) => r.id !== '2');
      },
    });
    const events = new CommandEvents(silentLogger);
    const keeper = new LeaseKeeper(store, new StoreOutage(events, silentLogger), 1000);
    const lost: string[] = [];
    const hold = (id: string, leaseMs: number) => {
      const lease = { ref: ref(id), leaseMs, renewedAt: 0, lost: () => void lost.push(id) };
      keeper.hold(lease);
      return lease;
    };
    hold('1', 8000);
    hold('2', 8000);
    hold('3', 8000);
    const lease4 = hold('4', 30000);
    await keeper.beat();
    expect(calls).toHaveLength(2);
    expect(calls[0]).toEqual({ refs: [ref('1'), ref('2'), ref('3')], leaseMs: 8000 });
    expect(calls[1]).toEqual({ refs: [ref('4')], leaseMs: 30000 });
    expect(lost).toEqual(['2']);
    expect(keeper.size).toBe(3);
    keeper.release(lease4);
    await keeper.beat();
    expect(calls.slice(2).map((c) => c.refs.map((r) => r.id))).toEqual([['1', '3']]);
    expect(lost).toEqual(['2']);
  });

  it('survives a failing store: reports store-error, keeps the claims, renews them once it is back', async () => {
    let down = true;
    const store = stubStore({
      heartbeat: async (refs) => {
        if (down) throw new Error('connection refused');
        return [...refs];
      },
    });
    const events = new CommandEvents(silentLogger);
    const seen: CommandEvent[] = [];
    events.on((e) => seen.push(e));
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (_: object, msg?: string) => void warnings.push(msg ?? '') };
    const keeper = new LeaseKeeper(store, new StoreOutage(events, logger), 1000);
    const lost: string[] = [];
    keeper.hold({ ref: ref('1'), leaseMs: 8000, renewedAt: 0, lost: () => lost.push('1') });
    await keeper.beat();
    await keeper.beat();
    expect(seen.filter((e) => e.kind === 'store-error')).toHaveLength(2);
    expect(warnings).toHaveLength(1); // logged once per outage, not per attempt
    down = false;
    await keeper.beat();
    expect(lost).toEqual([]);
    expect(keeper.size).toBe(1);
  });

  it('hears the store say a claim was taken away, and tells that claim alone at once', async () => {
    let announce: ((r: RevokedClaim) => void) | null = null;
    let unsubscribed = false;
    const store = stubStore({
      heartbeat: async (refs) => [...refs],
      revocations: {
        subscribe: async (onRevoked) => {
          announce = onRevoked;
          return async () => void (unsubscribed = true);
        },
      },
    });
    const keeper = new LeaseKeeper(
      store,
      new StoreOutage(new CommandEvents(silentLogger), silentLogger),
      60_000,
    );
    const lost: string[] = [];
    keeper.hold({ ref: ref('1'), leaseMs: 8000, renewedAt: 0, lost: (how) => lost.push(`1 ${how}`) });
    keeper.hold({ ref: ref('2'), leaseMs: 8000, renewedAt: 0, lost: (how) => lost.push(`2 ${how}`) });
    keeper.start();
    expect(await keeper.hearingRevocations).toBe(true);
    announce!({ ref: ref('2', 'someone else'), by: 'kill' });
    announce!({ ref: ref('9'), by: 'kill' });
    expect(lost).toEqual([]);
    announce!({ ref: ref('2'), by: 'requeue' });
    announce!({ ref: ref('2'), by: 'requeue' });
    expect(lost).toEqual(['2 requeue']);
    expect(keeper.size).toBe(1);
    await keeper.stop();
    expect(unsubscribed).toBe(true);
  });
});
