import { exponentialBackoff } from '@asynccmd/core';
import type { CommandExecutor, TransactionalExecutor } from '@asynccmd/runtime';
import type { Downstreams } from './downstream.js';
import { COMMAND_TYPES } from './domain/facts.js';
import { effectKey, type OrderPayloads } from './domain/payloads.js';
import { OrderRepository } from './domain/order-repository.js';
import type { TxSession } from './domain/gateway.js';
import type { OrderService } from './domain/order-service.js';

/** The isolated pool of the external-system sync: a slow ERP never starves the notifications. */
export const EXTERNAL_POOL = 'external-sync';

/** Orders of more than this many made-to-order items are refused by the (simulated) supplier. */
export const SUPPLIER_CAPACITY = 40;

export interface RetryProfile {
  /** Retries after the first attempt before a command becomes a dead letter. */
  readonly maxRetry: number;
  /** Delay before the first retry; doubles per retry (the demo keeps it short). */
  readonly backoffBaseMs: number;
  readonly backoffCapMs: number;
}

export const DEMO_RETRY: RetryProfile = { maxRetry: 3, backoffBaseMs: 200, backoffCapMs: 2_000 };

/** A runtime executor whose payload is the snapshot of its command type. */
export type OrderExecutor<K extends keyof OrderPayloads> = CommandExecutor<K, OrderPayloads[K]>;

/** One that runs in a transaction of the store's database (of any of the three: the handle is opaque here). */
export type TransactionalOrderExecutor<K extends keyof OrderPayloads> = TransactionalExecutor<
  K,
  OrderPayloads[K],
  unknown
>;

export type AnyOrderExecutor =
  | { [K in keyof OrderPayloads]: OrderExecutor<K> }[keyof OrderPayloads]
  | TransactionalOrderExecutor<'order.update-projection'>
  | TransactionalOrderExecutor<'order.confirm-inventory'>;

/**
 * The executors of the deferred actions. Delivery is at-least-once, so each remote call carries an
 * idempotency key built from (action, order, version). The two whose writes are local are
 * transactional: the supplier confirmation (the order's decision and the workflow of its
 * follow-ups) and the projection commit with their SUCCESS, once.
 */
export function orderExecutors(
  service: OrderService,
  downstreams: Downstreams,
  retry: RetryProfile = DEMO_RETRY,
  /** The order service's SQL on a transaction handle asynccmd hands out (`ctx.tx`). */
  sessionOf: (handle: unknown) => TxSession,
): AnyOrderExecutor[] {
  const common = {
    maxRetry: retry.maxRetry,
    backoff: exponentialBackoff({ baseMs: retry.backoffBaseMs, capMs: retry.backoffCapMs, jitter: 0.2 }),
    timeoutMs: 10_000,
  };
  const confirmInventory: TransactionalOrderExecutor<'order.confirm-inventory'> = {
    ...common,
    type: COMMAND_TYPES.confirmInventory,
    // The client is polling its 202: start at once, not on the next poll.
    mode: 'IMMEDIATE',
    // The order's decision and the workflow of its follow-ups are written in the attempt's
    // transaction and commit with its SUCCESS: follow-ups exist if and only if the confirmation
    // succeeded, never twice. The whole attempt runs in that transaction, the supplier's call
    // included: it holds a connection meanwhile, and on SQLite the database's one write lock.
    transactional: true,
    async execute(p, ctx) {
      const session = sessionOf(ctx.tx);
      // A remote call, at least once (its idempotency key dedupes it there); the supplier's ledger
      // line here records the delivery in the attempt's transaction, as the decision is.
      await downstreams.inventory.call(effectKey('confirm', p), ctx.signal, session);
      const tooMany = p.lines.find((l) => l.quantity > SUPPLIER_CAPACITY);
      // The client following its 202 reads the supplier's answer from this command's result.
      ctx.setResult({ decision: tooMany ? 'REJECTED' : 'CONFIRMED' });
      const decided = await new OrderRepository(session).decide(
        p.orderId,
        tooMany ? 'REJECTED' : 'CONFIRMED',
        tooMany
          ? `the supplier cannot make ${tooMany.quantity} × ${tooMany.sku} (at most ${SUPPLIER_CAPACITY})`
          : null,
        Date.now(),
      );
      // The follow-ups of the confirmed version, as a workflow written in this transaction.
      if (decided?.status === 'CONFIRMED') {
        await service.submitFollowUps(session, decided, (id) => ctx.workflow(id));
      }
    },
  };
  const notifyUser: OrderExecutor<'order.notify-user'> = {
    ...common,
    type: COMMAND_TYPES.notifyUser,
    // Time-sensitive and light: claimed by id right after the order commits.
    mode: 'IMMEDIATE',
    async execute(p, { signal }) {
      await downstreams.notification.call(effectKey('notify', p), signal);
    },
  };
  const syncExternal: OrderExecutor<'order.sync-external'> = {
    ...common,
    type: COMMAND_TYPES.syncExternal,
    // Slow and flaky: its own pool, so it cannot hold up anything else.
    mode: 'ASYNC_POOL',
    pool: EXTERNAL_POOL,
    async execute(p, { signal }) {
      await downstreams.external.call(effectKey('sync', p), signal);
    },
  };
  const updateProjection: TransactionalOrderExecutor<'order.update-projection'> = {
    ...common,
    type: COMMAND_TYPES.updateProjection,
    // Quick local work: inline in the poll loop.
    mode: 'SCHEDULED',
    // The read model is in the orders' database: the projection, its delivery record and the
    // command's SUCCESS commit together, so a second delivery can never apply it twice.
    transactional: true,
    async execute(p, { signal, tx }) {
      const session = sessionOf(tx);
      await downstreams.projection.call(effectKey('projection', p), signal, session);
      await new OrderRepository(session).applyProjection(p);
    },
  };
  return [confirmInventory, notifyUser, syncExternal, updateProjection];
}
