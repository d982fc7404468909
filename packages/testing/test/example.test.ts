// An example to copy: the order service's notification, tested with @asynccmd/testing under vitest.
// The application code is ../examples/order-notify.ts; the same test under node:test is
// ../examples/order-notify.node-test.ts.
import { describe, expect, it } from 'vitest';
import { createTestKit } from '@asynccmd/testing';
import { flakyMailer } from '../examples/flaky-mailer.js';
import { createOrderSchema, orderNotifyExecutor, placeOrder } from '../examples/order-notify.js';

/** A kit running the real executor against a mailer that fails once ("421 … try again later"). */
async function orderKit() {
  const { mailer, sent } = flakyMailer();
  const kit = await createTestKit({ executors: [orderNotifyExecutor(mailer)] });
  createOrderSchema(kit.db); // business tables live in the same in-memory database
  return { kit, sent };
}

describe('order.notify', () => {
  it('is submitted with the order, retried after a failure, and sends the mail once', async () => {
    const { kit, sent } = await orderKit();
    try {
      await placeOrder(kit.client, { id: 'o-1', email: 'ann@example.test' });
      await kit.expectSubmitted('order.notify', { orderId: 'o-1', version: 1 });

      const first = await kit.drainUntilIdle();
      expect(first.attempts).toMatchObject([
        { type: 'order.notify', outcome: 'retried', error: '421 service not available, try again later' },
      ]);
      expect(sent).toEqual([]);

      kit.advance(60_000); // the default backoff before the first retry
      const second = await kit.drainUntilIdle();
      expect(second.attempts).toMatchObject([{ outcome: 'succeeded', attempt: 2 }]);
      expect(sent).toEqual(['ann@example.test: Order o-1 confirmed [o-1@1]']);
    } finally {
      await kit.close();
    }
  });

  it('is not submitted when the order cannot be recorded', async () => {
    const { kit } = await orderKit();
    try {
      await placeOrder(kit.client, { id: 'o-1', email: 'ann@example.test' });
      // Same id again: the INSERT fails, the transaction rolls back, and its command with it.
      await expect(placeOrder(kit.client, { id: 'o-1', email: 'bob@example.test' })).rejects.toThrow(
        /UNIQUE/,
      );
      await kit.expectSubmitted('order.notify', { orderId: 'o-1' }, { count: 1 });
      await kit.expectNotSubmitted('order.notify', { email: 'bob@example.test' });
    } finally {
      await kit.close();
    }
  });
});
