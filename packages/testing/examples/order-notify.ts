// Application code under test: an order service that records an order and, in the same
// transaction, submits the command that e-mails the customer.
import type { SqliteDatabase } from '@asynccmd/adapter-sqlite';
import { defineExecutor, type AsyncCommandClient } from '@asynccmd/runtime';

export interface Mailer {
  send(to: string, subject: string, options: { idempotencyKey: string; signal: AbortSignal }): Promise<void>;
}

/** A snapshot of facts (id + version), never a live object. */
export interface NotifyPayload {
  orderId: string;
  version: number;
  email: string;
}

export function orderNotifyExecutor(mailer: Mailer) {
  return defineExecutor<'order.notify', NotifyPayload>({
    type: 'order.notify',
    mode: 'IMMEDIATE',
    maxRetry: 5,
    async execute({ orderId, version, email }, ctx) {
      // At-least-once delivery: the key lets the mailer drop a second delivery of the same mail.
      await mailer.send(email, `Order ${orderId} confirmed`, {
        idempotencyKey: `${orderId}@${version}`,
        signal: ctx.signal,
      });
    },
  });
}

export function createOrderSchema(db: SqliteDatabase): void {
  db.exec(
    'CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, email TEXT NOT NULL, version INTEGER NOT NULL)',
  );
}

export type OrderCommands = AsyncCommandClient<{ 'order.notify': NotifyPayload }, SqliteDatabase>;

/** Records the order and submits its notification in one transaction. */
export async function placeOrder(
  commands: OrderCommands,
  order: { id: string; email: string },
): Promise<void> {
  await commands.transaction(async (tx, submit) => {
    tx.prepare('INSERT INTO orders (id, email, version) VALUES (?, ?, 1)').run(order.id, order.email);
    await submit('order.notify', { orderId: order.id, version: 1, email: order.email });
  });
}
