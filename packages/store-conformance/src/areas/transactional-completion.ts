import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import type {
  ClaimedCommand,
  CommandId,
  CommandStore,
  SqlExecutor,
  TransactionalCompletion,
} from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import {
  claim,
  claimOne,
  DuringTransaction,
  freshToken,
  later,
  newCommand,
  rejectionCode,
  submitOne,
  uniqueType,
  untilDatabaseClockPasses,
  useArea,
} from '../support.js';

/** Thrown to roll a transaction back, as the runtime does when the completion was fenced out. */
class RolledBack extends Error {}

function completionOf<Tx>(store: CommandStore<Tx>): TransactionalCompletion<Tx> {
  const completion = store.transactionalCompletion;
  if (completion === undefined) throw new Error(`the ${store.dialect} store has no transactionalCompletion`);
  return completion;
}

/** A claimed command of a fresh type, and the type its follow-ups get. */
async function claimedCommand<Tx>(
  store: CommandStore<Tx>,
  leaseMs = 60_000,
): Promise<{ row: ClaimedCommand; followUpType: string }> {
  const type = uniqueType('txc');
  await submitOne(store, newCommand(type));
  return { row: await claimOne(store, type, { leaseMs }), followUpType: `${type}.next` };
}

/**
 * In one store transaction: submits a follow-up (the attempt's "effect"), then completes the attempt
 * fenced by its claim; rolls back when the completion was fenced out. `between` runs after the
 * follow-up and before the completion. Returns whether it committed, and the follow-up's id.
 */
async function completeWithFollowUp<Tx>(
  store: CommandStore<Tx>,
  row: ClaimedCommand,
  followUpType: string,
  options: { resultJson?: string; between?: () => Promise<void>; after?: () => Promise<void> } = {},
): Promise<{ committed: boolean; followUp: CommandId | null }> {
  let followUp: CommandId | null = null;
  try {
    await store.transaction(async (tx) => {
      followUp = (await store.insert(tx, [newCommand(followUpType)]))[0] ?? null;
      await options.between?.();
      const attempt = { id: row.id, token: row.claimToken };
      const held = await completionOf(store).complete(
        tx,
        options.resultJson === undefined ? attempt : { ...attempt, resultJson: options.resultJson },
      );
      if (!held) throw new RolledBack();
      await options.after?.();
    });
    return { committed: true, followUp };
  } catch (e) {
    if (e instanceof RolledBack) return { committed: false, followUp };
    throw e;
  }
}

/** Three claimed commands of a fresh type and the store's savepoints; null where it offers none. */
async function threeClaimed<Tx>(store: CommandStore<Tx>) {
  const savepoints = completionOf(store).savepoints;
  if (savepoints === undefined) return null;
  const type = uniqueType('txs');
  for (let i = 0; i < 3; i++) await submitOne(store, newCommand(type));
  const rows = await claim(store, type, { limit: 3 });
  expect(rows).toHaveLength(3);
  return { savepoints, type, rows };
}

export function transactionalCompletionArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('completion in a transaction', () => {
    const ctx = useArea(factory, adapter, 'txc');

    it('commits the writes of the transaction and the SUCCESS, with its result, together', async () => {
      const store = ctx.store();
      const { row, followUpType } = await claimedCommand(store);
      const { committed, followUp } = await completeWithFollowUp(store, row, followUpType, {
        resultJson: '{"applied": 1}',
      });
      expect(committed).toBe(true);
      const done = await store.get(row.id);
      expect(done?.status).toBe('SUCCESS');
      expect(done?.result).toEqual({ applied: 1 });
      expect(done?.finishedAt).toBeInstanceOf(Date);
      expect(done?.history.at(-1)?.outcome ?? 'succeeded').toBe('succeeded');
      expect(followUp).not.toBeNull();
      expect((await store.get(followUp!))?.status).toBe('PENDING');
      expect(await completionOf(store).succeededUnder({ id: row.id, token: row.claimToken })).toBe(true);
      // The attempt is over: its claim fences out any other outcome.
      expect(
        await store.fail([{ ref: { id: row.id, token: row.claimToken }, outcome: retryOutcome() }]),
      ).toEqual([]);
    });

    it('before COMMIT another connection still sees the command RUNNING and no follow-up', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      const { row, followUpType } = await claimedCommand(store);
      const read = new DuringTransaction<{ status?: string; followUps: number }>();
      const { committed } = await completeWithFollowUp(store, row, followUpType, {
        after: async () => {
          await read.ask(async () => {
            const followUps = await peer.list({ type: followUpType });
            return { status: (await peer.get(row.id))?.status, followUps: followUps.items.length };
          });
          read.over();
        },
      });
      expect(committed).toBe(true);
      // Answered while the transaction was open: as before it. Answered later (a store whose
      // transactions take turns), each read may have come before the commit or after it.
      const { answer, beforeCommit } = await read.answer;
      if (beforeCommit) expect(answer).toEqual({ status: 'RUNNING', followUps: 0 });
      else {
        expect(['RUNNING', 'SUCCESS']).toContain(answer.status);
        expect([0, 1]).toContain(answer.followUps);
      }
      expect((await peer.get(row.id))?.status).toBe('SUCCESS');
      expect((await peer.list({ type: followUpType })).items).toHaveLength(1);
      await peer.close();
    });

    it('a claim requeued before the completion completes nothing: rolled back, the follow-up is gone', async () => {
      const store = ctx.store();
      const { row, followUpType } = await claimedCommand(store);
      expect(E.isRight(await store.requeue(row.id, new Date()))).toBe(true);
      const { committed, followUp } = await completeWithFollowUp(store, row, followUpType, {
        resultJson: '"stale"',
      });
      expect(committed).toBe(false);
      expect(followUp).not.toBeNull();
      expect(await store.get(followUp!)).toBeNull();
      expect((await store.list({ type: followUpType })).items).toHaveLength(0);
      const after = await store.get(row.id);
      expect(after?.status).toBe('PENDING');
      expect(after?.result).toBeNull();
      expect(await completionOf(store).succeededUnder({ id: row.id, token: row.claimToken })).toBe(false);
    });

    it('a claim reclaimed and claimed again completes nothing under the old token; the new claim completes', async () => {
      const store = ctx.store();
      const { row, followUpType } = await claimedCommand(store, 50);
      await untilDatabaseClockPasses(store, row.leaseUntil!);
      const reclaimed = await store.reclaimHung({ limit: 1000, maxRescues: 5 });
      expect(reclaimed.map((r) => r.id)).toContain(row.id);
      const again = await claimOne(store, row.type, { now: later(), token: freshToken() });
      expect(again.id).toBe(row.id);
      const stale = await completeWithFollowUp(store, row, followUpType);
      expect(stale.committed).toBe(false);
      expect((await store.list({ type: followUpType })).items).toHaveLength(0);
      expect((await store.get(row.id))?.claimToken).toBe(again.claimToken);
      const fresh = await completeWithFollowUp(store, again, followUpType);
      expect(fresh.committed).toBe(true);
      expect((await store.list({ type: followUpType })).items.map((c) => c.id)).toEqual([fresh.followUp]);
      expect(await completionOf(store).succeededUnder({ id: row.id, token: row.claimToken })).toBe(false);
      expect(await completionOf(store).succeededUnder({ id: row.id, token: again.claimToken })).toBe(true);
    });

    it('a transaction rolled back after its completion leaves the command RUNNING under the same claim', async () => {
      const store = ctx.store();
      const { row, followUpType } = await claimedCommand(store);
      const ref = { id: row.id, token: row.claimToken };
      const failed = store.transaction(async (tx) => {
        await store.insert(tx, [newCommand(followUpType)]);
        expect(await completionOf(store).complete(tx, { ...ref, resultJson: '1' })).toBe(true);
        throw new RolledBack('the executor failed after all');
      });
      await expect(failed).rejects.toBeInstanceOf(RolledBack);
      const after = await store.get(row.id);
      expect(after?.status).toBe('RUNNING');
      expect(after?.claimToken).toBe(row.claimToken);
      expect(after?.result).toBeNull();
      expect((await store.list({ type: followUpType })).items).toHaveLength(0);
      expect(await completionOf(store).succeededUnder(ref)).toBe(false);
      // Still held: its heartbeat renews it, and it can be completed (or failed) as before.
      expect(await store.heartbeat([ref], 60_000)).toEqual([ref]);
      const retried = await completeWithFollowUp(store, row, followUpType);
      expect(retried.committed).toBe(true);
      expect((await store.list({ type: followUpType })).items).toHaveLength(1);
    });

    it('a requeue racing the open transaction: either the completion commits and the requeue is refused, or the requeue lands and nothing commits', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      const { row, followUpType } = await claimedCommand(store);
      let requeue: ReturnType<CommandStore['requeue']> | null = null;
      const { committed } = await completeWithFollowUp(store, row, followUpType, {
        between: async () => {
          requeue = peer.requeue(row.id, new Date());
          // Where the peer's write cannot wait for this transaction (it holds no lock yet on the
          // row), it lands meanwhile; where it must (SQLite's one writer), it goes after COMMIT.
          await Promise.race([requeue, sleep(300)]);
        },
      });
      const requeued = await requeue!;
      const followUps = (await store.list({ type: followUpType })).items;
      const after = await store.get(row.id);
      if (committed) {
        expect(E.isLeft(requeued)).toBe(true);
        expect(after?.status).toBe('SUCCESS');
        expect(followUps).toHaveLength(1);
      } else {
        expect(E.isRight(requeued)).toBe(true);
        expect(after?.status).toBe('PENDING');
        expect(followUps).toHaveLength(0);
      }
      await peer.close();
    });

    it('a reclaim of an expired lease after the completion, before COMMIT, never takes the command', async () => {
      const store = ctx.store();
      const peer = await ctx.harness().openPeer();
      const { row, followUpType } = await claimedCommand(store, 50);
      await untilDatabaseClockPasses(store, row.leaseUntil!);
      let reclaim: ReturnType<CommandStore['reclaimHung']> | null = null;
      const { committed } = await completeWithFollowUp(store, row, followUpType, {
        after: async () => {
          reclaim = peer.reclaimHung({ limit: 1000, maxRescues: 5 });
          await Promise.race([reclaim, sleep(300)]);
        },
      });
      expect(committed).toBe(true);
      expect((await reclaim!).map((r) => r.id)).not.toContain(row.id);
      expect((await store.get(row.id))?.status).toBe('SUCCESS');
      expect((await store.list({ type: followUpType })).items).toHaveLength(1);
      await peer.close();
    });

    it('a result that is not JSON text is INVALID_ARGUMENT before anything is written', async () => {
      const store = ctx.store();
      const { row } = await claimedCommand(store);
      const attempt = store.transaction((tx) =>
        completionOf(store).complete(tx, { id: row.id, token: row.claimToken, resultJson: '{oops' }),
      );
      expect(await rejectionCode(attempt)).toBe('INVALID_ARGUMENT');
      expect((await store.get(row.id))?.status).toBe('RUNNING');
    });

    it('completeAtCommit, where offered: the SUCCESS lands with the COMMIT, and a claim taken away fails the COMMIT with claimLost and commits nothing', async () => {
      const store = ctx.store();
      const completion = completionOf(store);
      // Offered as a pair, or not at all; a store without it completes with complete() (above).
      expect(completion.completeAtCommit === undefined).toBe(completion.claimLost === undefined);
      const atCommit = completion.completeAtCommit?.bind(completion);
      const claimLost = completion.claimLost?.bind(completion);
      if (atCommit === undefined || claimLost === undefined) return;
      // An SqlExecutor (an ORM's transaction) is not held: nothing is run on it, nothing written.
      const { row, followUpType } = await claimedCommand(store);
      let ran = 0;
      const orm: SqlExecutor = {
        kind: 'sql-executor',
        run: async () => {
          ran += 1;
          return [];
        },
      };
      expect(atCommit(orm, { id: row.id, token: row.claimToken })).toBe(false);
      expect(ran).toBe(0);
      expect((await store.get(row.id))?.status).toBe('RUNNING');
      let followUp: CommandId | null = null;
      await store.transaction(async (tx) => {
        followUp = (await store.insert(tx, [newCommand(followUpType)]))[0] ?? null;
        expect(atCommit(tx, { id: row.id, token: row.claimToken, resultJson: '{"at":"commit"}' })).toBe(true);
      });
      expect(await store.get(row.id)).toMatchObject({ status: 'SUCCESS', result: { at: 'commit' } });
      expect(await store.get(followUp!)).not.toBeNull();
      expect(await completion.succeededUnder({ id: row.id, token: row.claimToken })).toBe(true);
      // The claim taken away before the COMMIT: it fails, claimLost says why, nothing of it stays.
      const stale = await claimedCommand(store);
      expect(E.isRight(await store.requeue(stale.row.id, new Date()))).toBe(true);
      let staleFollowUp: CommandId | null = null;
      const failed = await store
        .transaction(async (tx) => {
          staleFollowUp = (await store.insert(tx, [newCommand(stale.followUpType)]))[0] ?? null;
          expect(atCommit(tx, { id: stale.row.id, token: stale.row.claimToken })).toBe(true);
        })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(failed).not.toBeNull();
      expect(claimLost(failed)).toBe(true);
      expect(claimLost(new Error('connection terminated'))).toBe(false);
      expect(await store.get(staleFollowUp!)).toBeNull();
      expect((await store.get(stale.row.id))?.status).toBe('PENDING');
    });

    it('savepoints, where offered: attempts sharing one transaction, one undone to its savepoint, the others committed with one completeAll', async () => {
      const store = ctx.store();
      const claimed = await threeClaimed(store);
      if (claimed === null) return;
      const { savepoints, type, rows } = claimed;
      const followUps: CommandId[] = [];
      let completed: CommandId[] = [];
      await store.transaction(async (tx) => {
        for (let i = 0; i < rows.length; i++) {
          const name = `attempt_${i}`;
          await savepoints.open(tx, name);
          followUps.push((await store.insert(tx, [newCommand(`${type}.next`)]))[0]!);
          // The middle attempt fails after its write: undone alone.
          if (i === 1) await savepoints.rollbackTo(tx, name);
        }
        completed = await savepoints.completeAll(tx, [
          { id: rows[0]!.id, token: rows[0]!.claimToken },
          { id: rows[2]!.id, token: rows[2]!.claimToken, resultJson: '{"n":2}' },
        ]);
      });
      expect(completed).toEqual([rows[0]!.id, rows[2]!.id]);
      const after = await store.getMany(rows.map((r) => r.id));
      expect(after.map((c) => c.status)).toEqual(['SUCCESS', 'RUNNING', 'SUCCESS']);
      expect(after[2]?.result).toEqual({ n: 2 });
      // By count, not by id: a store may give the undone row's id to the next insert (SQLite).
      const next = (await store.list({ type: `${type}.next` })).items;
      expect(next.map((c) => c.status)).toEqual(['PENDING', 'PENDING']);
      expect(next.map((c) => c.id)).toContain(followUps[0]);
    });

    it('completeAll, where offered: a claim taken away is left out, and undoing its savepoint undoes its writes and every completion after it', async () => {
      const store = ctx.store();
      const claimed = await threeClaimed(store);
      if (claimed === null) return;
      const { savepoints, type, rows } = claimed;
      expect(E.isRight(await store.requeue(rows[1]!.id, new Date()))).toBe(true);
      const refs = rows.map((r) => ({ id: r.id, token: r.claimToken }));
      let first: CommandId[] = [];
      let again: CommandId[] = [];
      await store.transaction(async (tx) => {
        for (let i = 0; i < rows.length; i++) {
          await savepoints.open(tx, `attempt_${i}`);
          await store.insert(tx, [newCommand(`${type}.next`)]);
        }
        first = await savepoints.completeAll(tx, refs);
        // The runtime's answer to a fenced attempt: back to its savepoint, the ones before it again.
        await savepoints.rollbackTo(tx, 'attempt_1');
        again = await savepoints.completeAll(tx, refs.slice(0, 1));
      });
      expect(first).toEqual([rows[0]!.id, rows[2]!.id]);
      expect(again).toEqual([rows[0]!.id]);
      const after = await store.getMany(rows.map((r) => r.id));
      expect(after.map((c) => c.status)).toEqual(['SUCCESS', 'PENDING', 'RUNNING']);
      expect((await store.list({ type: `${type}.next` })).items).toHaveLength(1);
    });

    it('savepoints, where offered: a failed statement after a savepoint is undone with it; failed() says when the transaction refuses the rest until then', async () => {
      // An executor that catches a failed statement of its own and returns: where the database
      // then refuses every statement (PostgreSQL), failed() must say so, and undoing the attempt to
      // its savepoint must make the transaction usable again; elsewhere the failure dooms nothing.
      const store = ctx.store();
      const claimed = await threeClaimed(store);
      const wrap = ctx.harness().sqlExecutor;
      if (claimed === null || wrap === undefined) return;
      const { savepoints, type, rows } = claimed;
      const states: boolean[] = [];
      let completed: CommandId[] = [];
      await store.transaction(async (tx) => {
        await savepoints.open(tx, 'attempt_0');
        await store.insert(tx, [newCommand(`${type}.next`)]);
        await savepoints.open(tx, 'attempt_1');
        await expect(
          wrap(tx).run(['SELECT missing_column FROM no_such_table_of_the_suite'], []),
        ).rejects.toThrow();
        if (savepoints.failed) states.push(await savepoints.failed(tx));
        await savepoints.rollbackTo(tx, 'attempt_1');
        if (savepoints.failed) states.push(await savepoints.failed(tx));
        await savepoints.open(tx, 'attempt_2');
        await store.insert(tx, [newCommand(`${type}.next`)]);
        completed = await savepoints.completeAll(tx, [
          { id: rows[0]!.id, token: rows[0]!.claimToken },
          { id: rows[2]!.id, token: rows[2]!.claimToken },
        ]);
      });
      // A store with failed(): true while refused (or false where nothing is refused), false once undone.
      if (savepoints.failed) expect(states[1]).toBe(false);
      // PostgreSQL (and PGlite) refuse every statement after a failed one until the rollback.
      if (savepoints.failed && ['postgres', 'pglite'].includes(store.dialect))
        expect(states).toEqual([true, false]);
      expect(completed).toEqual([rows[0]!.id, rows[2]!.id]);
      const after = await store.getMany(rows.map((r) => r.id));
      expect(after.map((c) => c.status)).toEqual(['SUCCESS', 'RUNNING', 'SUCCESS']);
      expect((await store.list({ type: `${type}.next` })).items).toHaveLength(2);
    });

    it('savepoints, where offered: a name that is not a plain identifier is INVALID_ARGUMENT, and nothing is sent', async () => {
      const store = ctx.store();
      const savepoints = completionOf(store).savepoints;
      if (savepoints === undefined) return;
      await store.transaction(async (tx) => {
        for (const name of ['a; DROP TABLE x', 'A', '', '1st', 'x'.repeat(64)]) {
          expect(await rejectionCode(savepoints.open(tx, name))).toBe('INVALID_ARGUMENT');
          expect(await rejectionCode(savepoints.rollbackTo(tx, name))).toBe('INVALID_ARGUMENT');
        }
      });
    });

    it('succeededUnder is false for a RUNNING command, an unknown token and an unknown id', async () => {
      const store = ctx.store();
      const { row } = await claimedCommand(store);
      const completion = completionOf(store);
      expect(await completion.succeededUnder({ id: row.id, token: row.claimToken })).toBe(false);
      expect(await completion.succeededUnder({ id: row.id, token: freshToken() })).toBe(false);
      expect(await completion.succeededUnder({ id: '999999999', token: row.claimToken })).toBe(false);
      expect(await claim(store, row.type)).toEqual([]);
    });
  });
}

function retryOutcome() {
  return { status: 'PENDING' as const, retryCount: 1, nextRunAt: later(), lastError: 'late failure' };
}
