// "The application's code" the test kit examples import as ../src/orders.js.
import type { SqliteDatabase } from '@asynccmd/adapter-sqlite';
import { defineExecutor, type AsyncCommandClient } from '@asynccmd/runtime';

export interface Mailer {
  send(to: string): Promise<void>;
}

export interface OrderNotifyPayload {
  orderId: string;
}

/** Sends the order's confirmation to the address stored with the order. */
export function orderNotifyExecutor(mailer: Mailer) {
  return defineExecutor<'order.notify', OrderNotifyPayload>({
    type: 'order.notify',
    maxRetry: 3,
    async execute({ orderId }) {
      await mailer.send(`customer of ${orderId}`);
    },
  });
}

/** Writes the order and submits its notification in one transaction. */
export async function placeOrder(
  client: AsyncCommandClient<{ 'order.notify': OrderNotifyPayload }, SqliteDatabase>,
  order: { id: string; email: string },
): Promise<void> {
  await client.transaction(async (db, submit) => {
    db.exec('CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, email TEXT)');
    db.prepare('INSERT INTO orders (id, email) VALUES (?, ?)').run(order.id, order.email);
    await submit('order.notify', { orderId: order.id });
  });
}
