import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import { COMMAND_TYPES, FACT_OF_COMMAND } from './facts.js';
import type { CommandGateway, OrderCommandName } from './gateway.js';
import type { Order } from './order.js';
import type { OrderPayloads } from './payloads.js';
import { OrderRepository } from './order-repository.js';
import { inventoryModeOf, type OrderRequest } from './order-request.js';
import { buildOperationView, type OperationView } from './operation-view.js';
import { priceLines, requestHash } from './pricing.js';

/** What accepting an order came to; the HTTP layer maps it to 201 / 202 / 409 / 422. */
export type AcceptOutcome =
  | { readonly kind: 'accepted'; readonly order: Order; readonly replayed: boolean }
  | { readonly kind: 'out-of-stock'; readonly sku: string; readonly quantity: number }
  | { readonly kind: 'request-id-reused'; readonly requestId: string; readonly orderId: number };

export class OutOfStock extends Error {
  constructor(
    readonly sku: string,
    readonly quantity: number,
  ) {
    super(`not enough ${sku} in stock for ${quantity}`);
  }
}

export interface OrderServiceOptions {
  /** Delay of the projection update (a batching knob; the experiment's cancel check raises it). */
  readonly projectionDelayMs?: number;
  readonly adminBase?: string;
}

/**
 * The split boundary (seed 2, §2): the request establishes the order's core facts — validated,
 * priced, stock reserved (or its confirmation owed), recorded — and registers the deferred actions
 * as commands in the SAME transaction. Nothing runs after the response that was not committed
 * before it.
 */
export class OrderService {
  readonly orders: OrderRepository;

  constructor(
    readonly db: Database.Database,
    private readonly commands: CommandGateway,
    private readonly options: OrderServiceOptions = {},
  ) {
    this.orders = new OrderRepository(db);
  }

  async accept(request: OrderRequest): Promise<AcceptOutcome> {
    const hash = requestHash(request);
    try {
      return await this.commands.transaction(async (tx) => {
        const repo = new OrderRepository(tx);
        const existing = request.requestId === null ? null : repo.byRequestId(request.requestId);
        if (existing) return replay(existing, hash);
        const mode = inventoryModeOf(request);
        const { lines, totalCents } = priceLines(request);
        if (mode === 'local') {
          for (const l of lines)
            if (!repo.reserveStock(l.sku, l.quantity)) throw new OutOfStock(l.sku, l.quantity);
        }
        const order = repo.insert({
          requestId: request.requestId,
          requestHash: hash,
          operationId: randomUUID(),
          customerId: request.customerId,
          email: request.email,
          lines,
          totalCents,
          inventoryMode: mode,
          boundary: 'commands',
          status: mode === 'local' ? 'CONFIRMED' : 'AWAITING_INVENTORY',
          createdAt: Date.now(),
        });
        if (mode === 'local') await this.submitFollowUps(tx, order);
        else {
          await this.submit(tx, order, COMMAND_TYPES.confirmInventory, {
            ...snapshot(order),
            lines: order.lines.map((l) => ({ sku: l.sku, quantity: l.quantity })),
          });
        }
        return { kind: 'accepted', order, replayed: false } as const;
      });
    } catch (error) {
      if (error instanceof OutOfStock)
        return { kind: 'out-of-stock', sku: error.sku, quantity: error.quantity };
      // Another process inserted the same request id between our read and our insert.
      const raced =
        request.requestId !== null && isUniqueViolation(error)
          ? this.orders.byRequestId(request.requestId)
          : null;
      if (raced) return replay(raced, hash);
      throw error;
    }
  }

  /**
   * The follow-ups every confirmed order owes, as snapshots of the confirmed version. Called in
   * the accepting transaction (local stock) or in the transaction that records the supplier's yes.
   */
  async submitFollowUps(tx: Database.Database, order: Order): Promise<void> {
    const base = snapshot(order);
    await this.submit(tx, order, COMMAND_TYPES.notifyUser, {
      ...base,
      email: order.email,
      totalCents: order.totalCents,
      itemCount: order.lines.reduce((n, l) => n + l.quantity, 0),
    });
    await this.submit(tx, order, COMMAND_TYPES.syncExternal, {
      ...base,
      customerId: order.customerId,
      lines: order.lines,
      totalCents: order.totalCents,
    });
    const delay = this.options.projectionDelayMs ?? 0;
    await this.submit(
      tx,
      order,
      COMMAND_TYPES.updateProjection,
      { ...base, customerId: order.customerId, totalCents: order.totalCents },
      delay > 0 ? new Date(Date.now() + delay) : undefined,
    );
  }

  private async submit<K extends OrderCommandName>(
    tx: Database.Database,
    order: Order,
    type: K,
    payload: OrderPayloads[K],
    runAt?: Date,
  ): Promise<void> {
    // One command per (action, order version): a re-delivered decision cannot double the follow-ups.
    const bizKey = `order-${order.id}-v${order.version}`;
    const { id } = await this.commands.submitIdempotent(
      tx,
      type,
      payload,
      runAt ? { bizKey, runAt } : { bizKey },
    );
    new OrderRepository(tx).linkCommand(order.id, FACT_OF_COMMAND[type], id);
  }

  /** A transaction on the shared connection (IMMEDIATE commands submitted in it start after commit). */
  transaction<T>(fn: (tx: Database.Database) => Promise<T>): Promise<T> {
    return this.commands.transaction(fn);
  }

  async operation(operationId: string): Promise<OperationView | null> {
    const order = this.orders.byOperationId(operationId);
    return order ? this.viewOf(order) : null;
  }

  /** Many operations at once: three statements whatever their number. */
  async operations(operationIds: readonly string[]): Promise<OperationView[]> {
    const orders = this.orders.byOperationIds(operationIds);
    const links = this.orders.commandsOfMany(orders.map((o) => o.id));
    const commands = await this.commands.getMany([...links.values()].flat().map((l) => l.commandId));
    const paths = { adminBase: this.options.adminBase ?? '/admin' };
    const byId = new Map(commands.map((c) => [c.id, c]));
    return orders.map((o) => {
      const own = links.get(o.id) ?? [];
      const rows = own.flatMap((l) => byId.get(l.commandId) ?? []);
      return buildOperationView(o, own, rows, paths);
    });
  }

  async viewOf(order: Order): Promise<OperationView> {
    const links = this.orders.commandsOf(order.id);
    const commands = await this.commands.getMany(links.map((l) => l.commandId));
    return buildOperationView(order, links, commands, { adminBase: this.options.adminBase ?? '/admin' });
  }
}

function snapshot(order: Order) {
  return { contract: 1 as const, operationId: order.operationId, orderId: order.id, version: order.version };
}

function replay(existing: Order, hash: string): AcceptOutcome {
  return existing.requestHash === hash
    ? { kind: 'accepted', order: existing, replayed: true }
    : { kind: 'request-id-reused', requestId: existing.requestId ?? '', orderId: existing.id };
}

function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 'SQLITE_CONSTRAINT_UNIQUE';
}
