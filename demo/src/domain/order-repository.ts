import { placeholders, type SqlSession } from '../db/sql.js';
import type { InventoryMode } from './catalog.js';
import type { FactName } from './facts.js';
import type { Order, OrderLine, OrderStatus } from './order.js';
import { insertIgnoring } from './schema.js';

/** A row as any of the drivers hands it back: BIGINT columns may come as strings (pg, mysql2). */
interface OrderRow {
  id: number | string;
  request_id: string | null;
  request_hash: string;
  operation_id: string;
  customer_id: string;
  email: string;
  line_items: string;
  total_cents: number | string;
  inventory_mode: InventoryMode;
  boundary: 'commands' | 'inline';
  status: OrderStatus;
  version: number | string;
  created_at: number | string;
  decided_at: number | string | null;
  reject_reason: string | null;
  inline_failure: string | null;
}

function toOrder(r: OrderRow): Order {
  return {
    id: Number(r.id),
    requestId: r.request_id,
    requestHash: r.request_hash,
    operationId: r.operation_id,
    customerId: r.customer_id,
    email: r.email,
    lines: JSON.parse(r.line_items) as OrderLine[],
    totalCents: Number(r.total_cents),
    inventoryMode: r.inventory_mode,
    boundary: r.boundary,
    status: r.status,
    version: Number(r.version),
    createdAt: Number(r.created_at),
    decidedAt: r.decided_at === null ? null : Number(r.decided_at),
    rejectReason: r.reject_reason,
    inlineFailure: r.inline_failure,
  };
}

/** What an insert needs: the order without what the database and later decisions fill in. */
export type NewOrder = Omit<Order, 'id' | 'version' | 'decidedAt' | 'rejectReason' | 'inlineFailure'>;

/** The order in which an operation lists its commands: the order they are submitted in. */
const FACT_ORDER: readonly FactName[] = [
  'inventory.confirmed',
  'user.notified',
  'external.synced',
  'projection.updated',
];
const byFact = (a: { fact: FactName }, b: { fact: FactName }) =>
  FACT_ORDER.indexOf(a.fact) - FACT_ORDER.indexOf(b.fact);

/** The order service's SQL, on one session (the caller's transaction, when it is one). */
export class OrderRepository {
  constructor(private readonly db: SqlSession) {}

  async insert(o: NewOrder): Promise<Order> {
    const id = await this.db.insert(
      `INSERT INTO orders (request_id, request_hash, operation_id, customer_id, email, line_items, total_cents,
           inventory_mode, boundary, status, created_at, decided_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        o.requestId,
        o.requestHash,
        o.operationId,
        o.customerId,
        o.email,
        JSON.stringify(o.lines),
        o.totalCents,
        o.inventoryMode,
        o.boundary,
        o.status,
        o.createdAt,
        o.status === 'AWAITING_INVENTORY' ? null : o.createdAt,
      ],
    );
    return (await this.byId(id)) as Order;
  }

  async byId(id: number): Promise<Order | null> {
    return this.one('SELECT * FROM orders WHERE id = ?', id);
  }

  async byRequestId(requestId: string): Promise<Order | null> {
    return this.one('SELECT * FROM orders WHERE request_id = ?', requestId);
  }

  async byOperationId(operationId: string): Promise<Order | null> {
    return this.one('SELECT * FROM orders WHERE operation_id = ?', operationId);
  }

  /** Orders by operation id, in one statement (the load tracker reads hundreds at a time). */
  async byOperationIds(operationIds: readonly string[]): Promise<Order[]> {
    if (operationIds.length === 0) return [];
    const rows = await this.db.all<OrderRow>(
      `SELECT * FROM orders WHERE operation_id IN ${placeholders(operationIds.length)}`,
      operationIds,
    );
    return rows.map(toOrder);
  }

  /** The command links of many orders, in one statement. */
  async commandsOfMany(
    orderIds: readonly number[],
  ): Promise<Map<number, { fact: FactName; commandId: string }[]>> {
    const links = new Map<number, { fact: FactName; commandId: string }[]>();
    if (orderIds.length === 0) return links;
    const rows = await this.db.all<{ order_id: number | string; fact: FactName; command_id: string }>(
      `SELECT order_id, fact, command_id FROM order_command WHERE order_id IN ${placeholders(orderIds.length)}`,
      orderIds,
    );
    for (const r of rows) {
      const list = links.get(Number(r.order_id)) ?? [];
      list.push({ fact: r.fact, commandId: String(r.command_id) });
      links.set(Number(r.order_id), list);
    }
    for (const list of links.values()) list.sort(byFact);
    return links;
  }

  /** Takes `quantity` of a locally stocked product; false when there is not enough. */
  async reserveStock(sku: string, quantity: number): Promise<boolean> {
    const changed = await this.db.run(
      'UPDATE stock SET available = available - ? WHERE sku = ? AND available >= ?',
      [quantity, sku, quantity],
    );
    return changed === 1;
  }

  /**
   * AWAITING_INVENTORY → CONFIRMED | REJECTED, once: returns the decided order, or null when it was
   * already decided (a re-delivered confirmation must not decide twice).
   */
  async decide(
    id: number,
    status: 'CONFIRMED' | 'REJECTED',
    reason: string | null,
    at: number,
  ): Promise<Order | null> {
    // No UPDATE … RETURNING on MariaDB: the guarded update, then a read in the same transaction.
    const changed = await this.db.run(
      `UPDATE orders SET status = ?, reject_reason = ?, decided_at = ?, version = version + 1
         WHERE id = ? AND status = 'AWAITING_INVENTORY'`,
      [status, reason, at, id],
    );
    return changed === 1 ? this.byId(id) : null;
  }

  async markInlineFailure(id: number, fact: FactName): Promise<void> {
    await this.db.run('UPDATE orders SET inline_failure = ? WHERE id = ?', [fact, id]);
  }

  async linkCommand(orderId: number, fact: FactName, commandId: string): Promise<void> {
    await this.db.run(
      this.db.dialect === 'mysql'
        ? `INSERT INTO order_command (order_id, fact, command_id) VALUES (?, ?, ?)
             ON DUPLICATE KEY UPDATE command_id = VALUES(command_id)`
        : `INSERT INTO order_command (order_id, fact, command_id) VALUES (?, ?, ?)
             ON CONFLICT (order_id, fact) DO UPDATE SET command_id = excluded.command_id`,
      [orderId, fact, commandId],
    );
  }

  async commandsOf(orderId: number): Promise<{ fact: FactName; commandId: string }[]> {
    return (await this.commandsOfMany([orderId])).get(orderId) ?? [];
  }

  /** Applies an order to the customer read model once per (order, version). */
  async applyProjection(order: {
    orderId: number;
    version: number;
    customerId: string;
    totalCents: number;
  }): Promise<boolean> {
    const fresh =
      (await this.db.run(
        insertIgnoring(this.db.dialect, 'projection_applied', 'order_id, version', '(?, ?)'),
        [order.orderId, order.version],
      )) === 1;
    if (fresh) {
      await this.db.run(
        this.db.dialect === 'mysql'
          ? `INSERT INTO customer_projection (customer_id, orders, total_cents, last_order_id) VALUES (?, 1, ?, ?)
               ON DUPLICATE KEY UPDATE orders = orders + 1,
                 total_cents = total_cents + VALUES(total_cents), last_order_id = VALUES(last_order_id)`
          : `INSERT INTO customer_projection (customer_id, orders, total_cents, last_order_id) VALUES (?, 1, ?, ?)
               ON CONFLICT (customer_id) DO UPDATE SET orders = customer_projection.orders + 1,
                 total_cents = customer_projection.total_cents + excluded.total_cents,
                 last_order_id = excluded.last_order_id`,
        [order.customerId, order.totalCents, order.orderId],
      );
    }
    return fresh;
  }

  private async one(sql: string, value: unknown): Promise<Order | null> {
    const rows = await this.db.all<OrderRow>(sql, [value]);
    return rows[0] ? toOrder(rows[0]) : null;
  }
}
