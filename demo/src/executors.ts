import { exponentialBackoff } from '@asynccmd/core';
import type { CommandExecutor } from '@asynccmd/runtime';
import type { Downstreams } from './downstream.js';
import { COMMAND_TYPES } from './domain/facts.js';
import { effectKey, type OrderPayloads } from './domain/payloads.js';
import { OrderRepository } from './domain/order-repository.js';
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

export type AnyOrderExecutor = { [K in keyof OrderPayloads]: OrderExecutor<K> }[keyof OrderPayloads];

/**
 * The executors of the deferred actions. Each is idempotent (delivery is at-least-once): the
 * downstream call carries an idempotency key built from (action, order, version), and local writes
 * are guarded by the state they expect.
 */
export function orderExecutors(
  service: OrderService,
  downstreams: Downstreams,
  retry: RetryProfile = DEMO_RETRY,
): AnyOrderExecutor[] {
  const common = {
    maxRetry: retry.maxRetry,
    backoff: exponentialBackoff({ baseMs: retry.backoffBaseMs, capMs: retry.backoffCapMs, jitter: 0.2 }),
    timeoutMs: 10_000,
  };
  const confirmInventory: OrderExecutor<'order.confirm-inventory'> = {
    ...common,
    type: COMMAND_TYPES.confirmInventory,
    // The client is polling its 202: start at once, not on the next poll.
    mode: 'IMMEDIATE',
    async execute(p, ctx) {
      await downstreams.inventory.call(effectKey('confirm', p), ctx.signal);
      const tooMany = p.lines.find((l) => l.quantity > SUPPLIER_CAPACITY);
      // The client following its 202 reads the supplier's answer from this command's result.
      ctx.setResult({ decision: tooMany ? 'REJECTED' : 'CONFIRMED' });
      // Record the supplier's answer and owe the follow-ups of the confirmed version, atomically.
      await service.transaction(async (tx) => {
        const decided = new OrderRepository(tx).decide(
          p.orderId,
          tooMany ? 'REJECTED' : 'CONFIRMED',
          tooMany
            ? `the supplier cannot make ${tooMany.quantity} × ${tooMany.sku} (at most ${SUPPLIER_CAPACITY})`
            : null,
          Date.now(),
        );
        if (decided?.status === 'CONFIRMED') await service.submitFollowUps(tx, decided);
      });
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
  const updateProjection: OrderExecutor<'order.update-projection'> = {
    ...common,
    type: COMMAND_TYPES.updateProjection,
    // Quick local work: inline in the poll loop.
    mode: 'SCHEDULED',
    async execute(p, { signal }) {
      await downstreams.projection.call(effectKey('projection', p), signal);
      await service.transaction(async (tx) => {
        new OrderRepository(tx).applyProjection(p);
      });
    },
  };
  return [confirmInventory, notifyUser, syncExternal, updateProjection];
}
