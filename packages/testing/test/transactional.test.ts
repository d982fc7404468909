import { afterEach, describe, expect, it } from 'vitest';
import type { SqliteDatabase } from '@asynccmd/adapter-sqlite';
import { defineExecutor, defineTransactionalExecutor, workflowStatus } from '@asynccmd/runtime';
import { createTestKit, type TestKit } from '@asynccmd/testing';

const kits: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(kits.splice(0).map((kit) => kit.close()));
});

/**
 * An executor that records a ledger line in the kit's database and submits a follow-up, in its
 * attempt's transaction; it fails after writing while `failing.times` is above zero.
 */
function ledgerExecutor(failing: { times: number }) {
  return defineTransactionalExecutor<SqliteDatabase>()<'ledger.record', { orderId: string }>({
    type: 'ledger.record',
    transactional: true,
    async execute({ orderId }, ctx) {
      ctx.tx.prepare('INSERT INTO ledger (order_id) VALUES (?)').run(orderId);
      await ctx.submit('ledger.notify', { orderId });
      if (failing.times > 0) {
        failing.times -= 1;
        throw new Error('the bank answered 503');
      }
      ctx.setResult({ recorded: orderId });
    },
  });
}

const notify = defineExecutor<'ledger.notify', { orderId: string }>({
  type: 'ledger.notify',
  execute: () => {},
});

async function kitWith(failing: { times: number }) {
  const kit = await createTestKit({ executors: [ledgerExecutor(failing), notify] });
  kits.push(kit);
  kit.db.exec('CREATE TABLE ledger (order_id TEXT NOT NULL)');
  return kit;
}

const ledgerLines = (kit: Pick<TestKit, 'db'>) =>
  (kit.db.prepare('SELECT order_id FROM ledger').all() as { order_id: string }[]).map((r) => r.order_id);

describe('transactional executors in the test kit', () => {
  it('commit their writes, their follow-ups and their SUCCESS together', async () => {
    const kit = await kitWith({ times: 0 });
    expect(await kit.runOnce('ledger.record', { orderId: 'o-1' })).toMatchObject({
      outcome: 'succeeded',
      result: { recorded: 'o-1' },
    });
    expect(ledgerLines(kit)).toEqual(['o-1']);
    await kit.expectSubmitted('ledger.notify', { orderId: 'o-1' });
    expect((await kit.drainUntilIdle()).attempts).toMatchObject([
      { type: 'ledger.notify', outcome: 'succeeded' },
    ]);
  });

  it('roll their writes and follow-ups back when they fail; the retry writes them once', async () => {
    const kit = await kitWith({ times: 1 });
    await kit.transaction((_tx, submit) => submit('ledger.record', { orderId: 'o-2' }));
    expect((await kit.drainUntilIdle()).attempts).toMatchObject([
      { type: 'ledger.record', outcome: 'retried', error: 'the bank answered 503' },
    ]);
    expect(ledgerLines(kit)).toEqual([]);
    await kit.expectNotSubmitted('ledger.notify');
    kit.advance(60_000);
    expect((await kit.drainUntilIdle()).attempts.map((a) => [a.type, a.outcome])).toEqual([
      ['ledger.record', 'succeeded'],
      ['ledger.notify', 'succeeded'],
    ]);
    expect(ledgerLines(kit)).toEqual(['o-2']);
  });

  it('submit a workflow in their transaction (ctx.workflow): it exists only once the attempt succeeded, and its steps run in order', async () => {
    const failing = { times: 1 };
    const settle = defineTransactionalExecutor<SqliteDatabase>()<'ledger.settle', { orderId: string }>({
      type: 'ledger.settle',
      transactional: true,
      async execute({ orderId }, ctx) {
        await ctx
          .workflow(`settle-${orderId}`)
          .step('notify', 'ledger.notify', { orderId })
          .step('record', 'ledger.record', { orderId }, { dependsOn: ['notify'] })
          .submit();
        if (failing.times > 0) {
          failing.times -= 1;
          throw new Error('the bank answered 503');
        }
      },
    });
    const kit = await createTestKit({ executors: [settle, ledgerExecutor({ times: 0 }), notify] });
    kits.push(kit);
    kit.db.exec('CREATE TABLE ledger (order_id TEXT NOT NULL)');
    expect(await kit.runOnce('ledger.settle', { orderId: 'o-3' })).toMatchObject({ outcome: 'retried' });
    expect(await workflowStatus(kit.store, 'settle-o-3')).toBeNull();
    kit.advance(60_000);
    const drained = await kit.drainUntilIdle();
    expect(drained.attempts.map((a) => [a.type, a.outcome])).toEqual([
      ['ledger.settle', 'succeeded'],
      ['ledger.notify', 'succeeded'],
      ['ledger.record', 'succeeded'],
      ['ledger.notify', 'succeeded'],
    ]);
    expect((await workflowStatus(kit.store, 'settle-o-3'))?.state).toBe('completed');
    expect(ledgerLines(kit)).toEqual(['o-3']);
  });
});
