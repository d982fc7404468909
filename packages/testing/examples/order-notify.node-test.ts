// The example test under node:test (node --test examples/dist/order-notify.node-test.js).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createTestKit } from '@asynccmd/testing';
import { flakyMailer } from './flaky-mailer.js';
import { createOrderSchema, orderNotifyExecutor, placeOrder } from './order-notify.js';

test('order.notify is retried after a failure and sends the mail once', async () => {
  const { mailer, sent } = flakyMailer();
  const kit = await createTestKit({ executors: [orderNotifyExecutor(mailer)] });
  try {
    createOrderSchema(kit.db);
    await placeOrder(kit.client, { id: 'o-1', email: 'ann@example.test' });
    await kit.expectSubmitted('order.notify', { orderId: 'o-1', version: 1 });

    const first = await kit.drainUntilIdle();
    assert.equal(first.attempts[0]?.outcome, 'retried');
    assert.deepEqual(sent, []);

    kit.advance(60_000); // the default backoff before the first retry
    const second = await kit.drainUntilIdle();
    assert.equal(second.attempts[0]?.outcome, 'succeeded');
    assert.deepEqual(sent, ['ann@example.test: Order o-1 confirmed [o-1@1]']);
  } finally {
    await kit.close();
  }
});

test('a failed expectation is an AssertionError node:test reports', async () => {
  const kit = await createTestKit({ executors: [orderNotifyExecutor(flakyMailer().mailer)] });
  try {
    await assert.rejects(kit.expectSubmitted('order.notify', { orderId: 'o-2' }), assert.AssertionError);
  } finally {
    await kit.close();
  }
});
