import { randomUUID } from 'node:crypto';
import type { SqlSession } from '../db/sql.js';
import type { Downstreams } from '../downstream.js';
import { SUPPLIER_CAPACITY } from '../executors.js';
import type { FactName } from './facts.js';
import type { Order } from './order.js';
import { OrderRepository } from './order-repository.js';
import { inventoryModeOf, type OrderRequest } from './order-request.js';
import { OutOfStock, type AcceptOutcome } from './order-service.js';
import { effectKey } from './payloads.js';
import { priceLines, requestHash } from './pricing.js';

/** The all-synchronous variant adds one outcome: a downstream failed while the client waited. */
export type InlineOutcome =
  | AcceptOutcome
  | { readonly kind: 'supplier-refused'; readonly reason: string }
  | {
      readonly kind: 'downstream-failed';
      readonly fact: FactName;
      readonly message: string;
      /** The order, when it was already recorded: the client sees an error for an order that exists. */
      readonly order: Order | null;
    };

/**
 * The "before" of the experiment: every downstream call happens inside the request, and the
 * response waits for all of them. Same validation, pricing, stock and downstreams as the split.
 */
export class InlineOrderService {
  readonly orders: OrderRepository;

  constructor(
    db: SqlSession,
    private readonly transaction: <T>(fn: (tx: SqlSession) => Promise<T>) => Promise<T>,
    private readonly downstreams: Downstreams,
  ) {
    this.orders = new OrderRepository(db);
  }

  async accept(request: OrderRequest): Promise<InlineOutcome> {
    const hash = requestHash(request);
    const existing = request.requestId === null ? null : await this.orders.byRequestId(request.requestId);
    if (existing) {
      return existing.requestHash === hash
        ? { kind: 'accepted', order: existing, replayed: true }
        : { kind: 'request-id-reused', requestId: existing.requestId ?? '', orderId: existing.id };
    }
    const mode = inventoryModeOf(request);
    const { lines, totalCents } = priceLines(request);
    const operationId = randomUUID();
    if (mode === 'downstream') {
      try {
        await this.downstreams.inventory.call(`confirm:${operationId}`);
      } catch (e) {
        return {
          kind: 'downstream-failed',
          fact: 'inventory.confirmed',
          message: (e as Error).message,
          order: null,
        };
      }
      const tooMany = lines.find((l) => l.quantity > SUPPLIER_CAPACITY);
      if (tooMany)
        return {
          kind: 'supplier-refused',
          reason: `the supplier cannot make ${tooMany.quantity} × ${tooMany.sku}`,
        };
    }
    let order: Order;
    try {
      order = await this.transaction(async (tx) => {
        const repo = new OrderRepository(tx);
        if (mode === 'local') {
          for (const l of [...lines].sort((a, b) => a.sku.localeCompare(b.sku)))
            if (!(await repo.reserveStock(l.sku, l.quantity))) throw new OutOfStock(l.sku, l.quantity);
        }
        return repo.insert({
          requestId: request.requestId,
          requestHash: hash,
          operationId,
          customerId: request.customerId,
          email: request.email,
          lines,
          totalCents,
          inventoryMode: mode,
          boundary: 'inline',
          status: 'CONFIRMED',
          createdAt: Date.now(),
        });
      });
    } catch (e) {
      if (e instanceof OutOfStock) return { kind: 'out-of-stock', sku: e.sku, quantity: e.quantity };
      throw e;
    }
    const snap = { orderId: order.id, version: order.version };
    const steps: [FactName, () => Promise<unknown>][] = [
      ['user.notified', () => this.downstreams.notification.call(effectKey('notify', snap))],
      ['external.synced', () => this.downstreams.external.call(effectKey('sync', snap))],
      [
        'projection.updated',
        async () => {
          await this.downstreams.projection.call(effectKey('projection', snap));
          await this.transaction((tx) =>
            new OrderRepository(tx).applyProjection({ ...order, orderId: order.id }),
          );
        },
      ],
    ];
    for (const [fact, step] of steps) {
      try {
        await step();
      } catch (e) {
        // Nothing will finish this order's remaining steps, and the client was told it failed.
        await this.orders.markInlineFailure(order.id, fact);
        return { kind: 'downstream-failed', fact, message: (e as Error).message, order };
      }
    }
    return { kind: 'accepted', order, replayed: false };
  }
}
