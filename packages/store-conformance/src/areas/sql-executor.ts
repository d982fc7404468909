import { describe, expect, it } from 'vitest';
import type {
  CommandId,
  CommandStore,
  CompletedAttempt,
  SqlExecutor,
  TransactionalCompletion,
} from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import { claimOne, newCommand, submitOne, uniqueType, useArea } from '../support.js';

/** Thrown to roll a transaction back, as an ORM's transaction callback would. */
class RolledBack extends Error {}

/**
 * Submits and completions through an SqlExecutor (what an ORM bridge hands the store), where the
 * store says it takes one: the same rows, the same fencing, the same rollback as through the
 * store's own transaction handle. The harness wraps the store's own transaction as an SqlExecutor,
 * the way a bridge wraps its ORM's.
 */
export function sqlExecutorArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('submits and completions through an SqlExecutor', () => {
    const ctx = useArea(factory, adapter, 'sqlx');

    /** Runs `body` on an SqlExecutor over a store transaction; false when `body` rolled it back. */
    async function inExecutor(body: (sql: SqlExecutor) => Promise<void>): Promise<boolean> {
      const store = ctx.store();
      const wrap = ctx.harness().sqlExecutor;
      if (wrap === undefined)
        throw new Error(`the ${adapter} harness has no sqlExecutor though the store takes one`);
      try {
        await store.transaction((tx) => body(wrap(tx)));
        return true;
      } catch (e) {
        if (e instanceof RolledBack) return false;
        throw e;
      }
    }

    /** The error code of a completion of `attempt` through an SqlExecutor; undefined when it was not refused. */
    async function refusal(txc: TransactionalCompletion<Tx>, attempt: CompletedAttempt): Promise<unknown> {
      let code: unknown;
      await inExecutor(async (sql) => {
        try {
          await txc.complete(sql, attempt);
        } catch (e) {
          code = (e as { code?: unknown }).code;
        }
      });
      return code;
    }

    const completion = (store: CommandStore<Tx>): TransactionalCompletion<Tx> | undefined =>
      store.transactionalCompletion?.throughSqlExecutor === true ? store.transactionalCompletion : undefined;

    it('where the store takes an SqlExecutor, the harness can make one (the suite needs it)', () => {
      const store = ctx.store();
      if (store.capabilities.sqlExecutor || store.transactionalCompletion?.throughSqlExecutor === true) {
        expect(ctx.harness().sqlExecutor, 'harness.sqlExecutor').toBeTypeOf('function');
      }
    });

    it('inserts and idempotent inserts through it commit with the transaction, and roll back with it', async () => {
      const store = ctx.store();
      if (!store.capabilities.sqlExecutor) return;
      const type = uniqueType('sqlx');
      let ids: CommandId[] = [];
      expect(
        await inExecutor(async (sql) => {
          ids = await store.insert(sql, [newCommand(type), newCommand(type, { priority: 3 })]);
          const first = await store.insertIdempotent(sql, { ...newCommand(type), bizKey: 'k-1' });
          const again = await store.insertIdempotent(sql, { ...newCommand(type), bizKey: 'k-1' });
          expect(first.duplicate).toBe(false);
          expect(again).toEqual({ ...first, duplicate: true });
          ids.push(first.id);
        }),
      ).toBe(true);
      expect(ids).toHaveLength(3);
      expect((await store.getMany(ids)).map((c) => c.status)).toEqual(['PENDING', 'PENDING', 'PENDING']);
      const rolledBack = uniqueType('sqlx');
      expect(
        await inExecutor(async (sql) => {
          await store.insert(sql, [newCommand(rolledBack)]);
          await store.insertIdempotent(sql, { ...newCommand(rolledBack), bizKey: 'k-2' });
          throw new RolledBack();
        }),
      ).toBe(false);
      expect((await store.list({ type: rolledBack })).items).toEqual([]);
    });

    it('where the store cannot complete through it, a completion through it is INVALID_ARGUMENT and writes nothing', async () => {
      const store = ctx.store();
      const txc = store.transactionalCompletion;
      if (txc === undefined || txc.throughSqlExecutor === true) return;
      const type = uniqueType('sqlx');
      await submitOne(store, newCommand(type));
      const held = await claimOne(store, type);
      expect(await refusal(txc, { id: held.id, token: held.claimToken })).toBe('INVALID_ARGUMENT');
      expect((await store.get(held.id))?.status).toBe('RUNNING');
    });

    it('a completion through it commits with the follow-up written beside it; fenced out, nothing commits', async () => {
      const store = ctx.store();
      const txc = completion(store);
      if (txc === undefined) return;
      const type = uniqueType('sqlx');
      await submitOne(store, newCommand(type));
      await submitOne(store, newCommand(type));
      const held = await claimOne(store, type);
      const next = `${type}.next`;
      expect(
        await inExecutor(async (sql) => {
          await store.insert(sql, [newCommand(next)]);
          if (!(await txc.complete(sql, { id: held.id, token: held.claimToken, resultJson: '{"n":1}' })))
            throw new RolledBack();
        }),
      ).toBe(true);
      expect((await store.get(held.id))?.status).toBe('SUCCESS');
      expect((await store.get(held.id))?.result).toEqual({ n: 1 });
      expect((await store.list({ type: next })).items).toHaveLength(1);

      // A claim taken away (requeued) before the completion: fenced out, so the follow-up goes too.
      const stale = await claimOne(store, type);
      await store.requeue(stale.id, new Date());
      expect(
        await inExecutor(async (sql) => {
          await store.insert(sql, [newCommand(next)]);
          if (!(await txc.complete(sql, { id: stale.id, token: stale.claimToken }))) throw new RolledBack();
        }),
      ).toBe(false);
      expect((await store.get(stale.id))?.status).toBe('PENDING');
      expect((await store.list({ type: next })).items).toHaveLength(1);
    });

    it('a completion through it refuses a result that is not JSON before writing anything', async () => {
      const store = ctx.store();
      const txc = completion(store);
      if (txc === undefined) return;
      const type = uniqueType('sqlx');
      await submitOne(store, newCommand(type));
      const held = await claimOne(store, type);
      expect(await refusal(txc, { id: held.id, token: held.claimToken, resultJson: '{not json' })).toBe(
        'INVALID_ARGUMENT',
      );
      expect((await store.get(held.id))?.status).toBe('RUNNING');
    });
  });
}
