import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import {
  ADMIN_TRANSITIONS,
  COMMAND_STATUSES,
  decideFailure,
  immediateBackoff,
  truncateErrorText,
  LIMITS,
} from '@asynccmd/core';
import type { AdminTransition, CommandId, CommandStatus, CommandStore, RevokedClaim } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import { submitWaiting } from './dependencies.js';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  claim,
  claimOne,
  freshToken,
  later,
  newCommand,
  submitOne,
  uniqueType,
  untilDatabaseClockPasses,
  useArea,
} from '../support.js';
import { failOnce } from './outcomes.js';
import { TRANSITION_SOURCES } from '@asynccmd/core/store-kit';

/** Puts a fresh command of a fresh type into `status` through the store's own transitions. */
export async function commandIn<Tx>(
  store: CommandStore<Tx>,
  status: CommandStatus,
  type = uniqueType(status.toLowerCase()),
): Promise<{ id: CommandId; type: string; token: string | null }> {
  if (status === 'WAITING') {
    const dependency = await submitOne(store, newCommand(`${type}.dependency`, { maxRetry: 0 }));
    return {
      id: await submitWaiting(store, newCommand(type, { maxRetry: 0 }), [dependency]),
      type,
      token: null,
    };
  }
  const id = await submitOne(store, newCommand(type, { maxRetry: 0 }));
  if (status === 'PENDING') return { id, type, token: null };
  if (status === 'CANCELLED') {
    expect(E.isRight(await store.cancel(id, 'set up as cancelled'))).toBe(true);
    return { id, type, token: null };
  }
  const c = await store.claimById({ id, now: later(), token: freshToken(), leaseMs: 60_000 });
  if (!c) throw new Error(`could not claim ${id} to put it into ${status}`);
  if (status === 'SUCCESS') expect(await store.complete([{ id, token: c.claimToken }])).toEqual([id]);
  if (status === 'DEAD') {
    const outcome = decideFailure(c, new Error('set up as dead'), new Date(), immediateBackoff);
    expect(await store.fail([{ ref: { id, token: c.claimToken }, outcome }])).toEqual([id]);
  }
  return { id, type, token: status === 'RUNNING' ? c.claimToken : null };
}

function apply<Tx>(store: CommandStore<Tx>, t: AdminTransition, id: CommandId, now: Date) {
  switch (t) {
    case 'retry':
      return store.retry(id, now);
    case 'requeue':
      return store.requeue(id, now);
    case 'kill':
      return store.kill(id, 'by the operator');
    case 'cancel':
      return store.cancel(id, 'by the operator');
  }
}

const TARGET: { readonly [T in AdminTransition]: CommandStatus } = {
  retry: 'PENDING',
  requeue: 'PENDING',
  kill: 'CANCELLED',
  cancel: 'CANCELLED',
};

export function adminArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('admin transitions', () => {
    const ctx = useArea(factory, adapter, 'adm');

    describe.each(ADMIN_TRANSITIONS.map((t) => [t]))('%s', (transition) => {
      it.each(COMMAND_STATUSES.map((s) => [s]))(
        `from %s: allowed exactly when the core allows it`,
        async (from) => {
          const store = ctx.store();
          const { id } = await commandIn(store, from);
          const before = await store.get(id);
          const now = new Date(Date.UTC(2030, 1, 2, 3, 4, 5, 6));
          const result = await apply(store, transition, id, now);
          if (TRANSITION_SOURCES[transition].includes(from)) {
            expect(E.isRight(result)).toBe(true);
            const after = E.isRight(result) ? result.right : null;
            expect(after).toMatchObject({
              id,
              status: TARGET[transition],
              claimToken: null,
              leaseUntil: null,
            });
            expect(await store.get(id)).toEqual(after);
          } else {
            expect(E.isLeft(result) && result.left.code).toBe('ILLEGAL_TRANSITION');
            expect(E.isLeft(result) && result.left).toMatchObject({ transition, from });
            expect(await store.get(id)).toEqual(before);
          }
        },
      );
    });

    it('retry: DEAD → PENDING with fresh attempts, due at `now`, keeping the last error and the counts', async () => {
      const store = ctx.store();
      const { id, type } = await commandIn(store, 'DEAD');
      const now = new Date(Date.UTC(2030, 1, 2, 3, 4, 5, 6));
      const r = await store.retry(id, now);
      expect(E.isRight(r) && r.right).toMatchObject({
        status: 'PENDING',
        retryCount: 1,
        rescueCount: 0,
        retryCountAtRetry: 1,
        rescueCountAtRetry: 0,
        lastError: 'set up as dead',
        finishedAt: null,
      });
      expect(E.isRight(r) && r.right.nextRunAt.getTime()).toBe(now.getTime());
      expect((await claimOne(store, type, { now })).id).toBe(id);
    });

    it('retry keeps the record: counts and history survive it, and the retry budget starts again', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type, { maxRetry: 1 }));
      const statuses = async (messages: string[]) => {
        const out: string[] = [];
        for (const m of messages) out.push((await failOnce(store, type, m, 'worker')).status);
        return out;
      };
      expect(await statuses(['one', 'two'])).toEqual(['PENDING', 'DEAD']);
      const r = await store.retry(id, new Date());
      expect(E.isRight(r) && r.right).toMatchObject({ retryCount: 2, retryCountAtRetry: 2 });
      // maxRetry 1 again: one retry, then a dead letter once more; nothing counted is lost.
      expect(await statuses(['three', 'four'])).toEqual(['PENDING', 'DEAD']);
      const dead = await store.get(id);
      expect(dead).toMatchObject({ status: 'DEAD', retryCount: 4, retryCountAtRetry: 2, lastError: 'four' });
      expect(dead!.history.map((a) => [a.outcome, a.error])).toEqual([
        ['failed', 'one'],
        ['dead', 'two'],
        ['failed', 'three'],
        ['dead', 'four'],
      ]);
    });

    it('requeue and kill of a running command end its attempt in the history; kill of one not running adds none', async () => {
      const store = ctx.store();
      const requeued = await commandIn(store, 'RUNNING');
      expect(E.isRight(await store.requeue(requeued.id, new Date()))).toBe(true);
      const killed = await commandIn(store, 'RUNNING');
      expect(E.isRight(await store.kill(killed.id, 'poison'))).toBe(true);
      const pending = await commandIn(store, 'PENDING');
      expect(E.isRight(await store.kill(pending.id, 'not needed'))).toBe(true);
      const [r, k, p] = await store.getMany([requeued.id, killed.id, pending.id]);
      expect(r!.history.map((a) => [a.outcome, a.error])).toEqual([['requeued', null]]);
      expect(k!.history.map((a) => [a.outcome, a.error])).toEqual([['killed', 'poison']]);
      expect(k!.history[0]!.startedAt).toEqual(k!.startedAt);
      expect(p!.history).toEqual([]);
    });

    it('requeue: RUNNING → PENDING due at `now`; the old claim is fenced out, and held back until it lets go', async () => {
      const store = ctx.store();
      const { id, type, token } = await commandIn(store, 'RUNNING');
      const now = new Date(Date.UTC(2030, 1, 2));
      const r = await store.requeue(id, now);
      expect(E.isRight(r) && r.right).toMatchObject({
        status: 'PENDING',
        claimToken: null,
        leaseUntil: null,
      });
      expect(E.isRight(r) && r.right.nextRunAt.getTime()).toBe(now.getTime());
      const old = { id, token: token! };
      expect(await store.complete([old])).toEqual([]);
      expect(await store.heartbeat([old], 60_000)).toEqual([]);
      // The old executor may still be running: nobody may start the command again meanwhile.
      expect(await claim(store, type, { now })).toEqual([]);
      expect(await store.claimById({ id, now, token: freshToken(), leaseMs: 1000 })).toBeNull();
      // Only the old claim can let go (a stranger's ref changes nothing); then it is claimable at once.
      expect(await store.releaseRevoked([{ id, token: freshToken() }])).toEqual([]);
      expect(await claim(store, type, { now })).toEqual([]);
      expect(await store.releaseRevoked([old, old])).toEqual([id]);
      expect(await store.releaseRevoked([old])).toEqual([]);
      const again = await claimOne(store, type, { now });
      expect(again.id).toBe(id);
      // Letting go again, late, touches nothing of the new claim.
      expect(await store.releaseRevoked([old])).toEqual([]);
      expect(await store.get(id)).toMatchObject({ status: 'RUNNING', claimToken: again.claimToken });
    });

    it('requeue: without a word from the old claim, the command is claimable once that lease has run out', async () => {
      const store = ctx.store();
      const type = uniqueType();
      const id = await submitOne(store, newCommand(type));
      const c = await claimOne(store, type, { leaseMs: 1_000 });
      expect(E.isRight(await store.requeue(id, new Date()))).toBe(true);
      const early = await claim(store, type);
      // Inside the lease on the database clock nobody gets it (a slow machine may be past it already).
      if ((await store.now()).getTime() <= c.leaseUntil!.getTime()) expect(early).toEqual([]);
      if (early.length === 0) {
        await untilDatabaseClockPasses(store, c.leaseUntil!);
        // Held back, not hung: no reclaim touches it.
        expect((await store.reclaimHung({ limit: 1000, maxRescues: 5 })).map((x) => x.id)).not.toContain(id);
        expect((await claimOne(store, type)).id).toBe(id);
      } else expect(early.map((x) => x.id)).toEqual([id]);
    });

    it('revocations: where the store declares them, the holder hears of a requeue or a kill of its running claim', async () => {
      const store = ctx.store();
      if (!store.capabilities.revocations) {
        expect(store.revocations).toBeUndefined();
        return;
      }
      const peer = await ctx.harness().openPeer();
      try {
        const heard: RevokedClaim[] = [];
        const unsubscribe = await peer.revocations!.subscribe((r) => heard.push(r));
        const requeued = await commandIn(store, 'RUNNING');
        const killed = await commandIn(store, 'RUNNING');
        const pending = await commandIn(store, 'PENDING');
        expect(E.isRight(await store.requeue(requeued.id, new Date()))).toBe(true);
        expect(E.isRight(await store.kill(killed.id, 'poison'))).toBe(true);
        expect(E.isRight(await store.kill(pending.id))).toBe(true);
        const expected = [
          { ref: { id: requeued.id, token: requeued.token }, by: 'requeue' },
          { ref: { id: killed.id, token: killed.token }, by: 'kill' },
        ];
        for (let i = 0; i < 500 && heard.length < expected.length; i++) await sleep(10);
        expect(heard).toEqual(expected);
        await unsubscribe();
      } finally {
        await peer.close();
      }
    });

    it('kill: a running command is cancelled and its executor fenced out; the reason becomes lastError', async () => {
      const store = ctx.store();
      const { id, token } = await commandIn(store, 'RUNNING');
      const r = await store.kill(id, 'poison message 💀');
      expect(E.isRight(r) && r.right).toMatchObject({ status: 'CANCELLED', lastError: 'poison message 💀' });
      expect(E.isRight(r) && r.right.finishedAt).toBeInstanceOf(Date);
      expect(await store.complete([{ id, token: token! }])).toEqual([]);
      expect(
        await store.fail([
          {
            ref: { id, token: token! },
            outcome: { status: 'PENDING', retryCount: 1, nextRunAt: new Date(), lastError: 'late' },
          },
        ]),
      ).toEqual([]);
      expect((await store.get(id))!.status).toBe('CANCELLED');
    });

    it('a long reason is truncated like any error text', async () => {
      const store = ctx.store();
      const { id } = await commandIn(store, 'PENDING');
      const reason = 'z'.repeat(LIMITS.lastErrorChars - 1) + '🔥 and more';
      const r = await store.kill(id, reason);
      expect(E.isRight(r) && r.right.lastError).toBe(truncateErrorText(reason));
    });

    it('kill and cancel without a reason keep the last error', async () => {
      const store = ctx.store();
      const dead = await commandIn(store, 'DEAD');
      const r = await store.kill(dead.id);
      expect(E.isRight(r) && r.right.lastError).toBe('set up as dead');
      const pending = await commandIn(store, 'PENDING');
      const c = await store.cancel(pending.id);
      expect(E.isRight(c) && c.right).toMatchObject({ status: 'CANCELLED', lastError: null });
    });

    it('a command that does not exist is a NOT_FOUND Left; a malformed id is refused', async () => {
      const store = ctx.store();
      for (const t of ADMIN_TRANSITIONS) {
        const r = await apply(store, t, '9223372036854775807', new Date());
        expect(E.isLeft(r) && r.left).toMatchObject({ code: 'NOT_FOUND', commandId: '9223372036854775807' });
        await expect(apply(store, t, 'DROP TABLE', new Date())).rejects.toMatchObject({ code: 'INVALID_ID' });
      }
    });
  });
}
