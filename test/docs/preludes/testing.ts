// The application's code under test (test/docs/src/orders.ts), vitest's `expect`, and a
// mailer that fails once.
import { expect } from 'vitest';
import { orderNotifyExecutor, placeOrder } from '../src/orders.js';

export { expect, orderNotifyExecutor, placeOrder };
let preludeCalls = 0;
export const flakyMailer = {
  async send(to: string): Promise<void> {
    if (++preludeCalls === 1) throw new Error(`421 try again later (${to})`);
  },
};
