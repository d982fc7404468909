// `store`, `executors`, `notify`, `commands`, `client` and `token`: an application's runtime on
// SQLite whose executors cover the command types the examples submit.
import * as preludeSqlite from '@asynccmd/adapter-sqlite';
import * as preludeRuntime from '@asynccmd/runtime';

export const store = preludeSqlite.createSqliteStore({ filename: 'app.db' });
await store.migrate();
export const notify = preludeRuntime.defineExecutor<'order.notify', { orderId: string; version: number }>({
  type: 'order.notify',
  execute: () => undefined,
});
// A generic payload type cannot go through defineExecutor's payload rules: typed as the interface.
const preludeExecutor = <T extends string, P>(type: T): preludeRuntime.CommandExecutor<T, P> => ({
  type,
  execute: () => undefined,
});
export const executors = [
  notify,
  preludeExecutor<'order.ship', { orderId: string }>('order.ship'),
  preludeExecutor<'order.refund', { orderId: string }>('order.refund'),
  preludeExecutor<'report.render', { reportId: string }>('report.render'),
  preludeExecutor<'invoice.send', { invoiceId: string }>('invoice.send'),
  preludeExecutor<'payment.capture', { orderId: string }>('payment.capture'),
  preludeExecutor<'payment.refund', { orderId: string }>('payment.refund'),
  preludeExecutor<'search.reindex', { docId: string; version: number }>('search.reindex'),
  preludeExecutor<'mail.send', { to: string }>('mail.send'),
] as const;
export const commands = preludeRuntime.createAsyncCommands({ store, executors });
export const client = commands.client;
export const token = process.env['ASYNCCMD_ADMIN_TOKEN'] ?? '';
