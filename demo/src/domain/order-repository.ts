import type Database from 'better-sqlite3';
import type { InventoryMode } from './catalog.js';
import type { FactName } from './facts.js';
import type { Order, OrderLine, OrderStatus } from './order.js';

interface OrderRow {
  id: number;
  request_id: string | null;
  request_hash: string;
  operation_id: string;
  customer_id: string;
  email: string;
  lines: string;
  total_cents: number;
  inventory_mode: InventoryMode;
  boundary: 'commands' | 'inline';
  status: OrderStatus;
  version: number;
  created_at: number;
  decided_at: number | null;
  reject_reason: string | null;
  inline_failure: string | null;
}

function toOrder(r: OrderRow): Order {
  return {
    id: r.id,
    requestId: r.request_id,
    requestHash: r.request_hash,
    operationId: r.operation_id,
    customerId: r.customer_id,
    email: r.email,
    lines: JSON.parse(r.lines) as OrderLine[],
    totalCents: r.total_cents,
    inventoryMode: r.inventory_mode,
    boundary: r.boundary,
    status: r.status,
    version: r.version,
    createdAt: r.created_at,
    decidedAt: r.decided_at,
    rejectReason: r.reject_reason,
    inlineFailure: r.inline_failure,
  };
}

/** What an insert needs: the order without what the database and later decisions fill in. */
export type NewOrder = Omit<Order, 'id' | 'version' | 'decidedAt' | 'rejectReason' | 'inlineFailure'>;

const STATEMENTS = new WeakMap<Database.Database, Map<string, Database.Statement>>();

/** The order service's SQL, on one better-sqlite3 connection (the caller's transaction, when open). */
export class OrderRepository {
  constructor(private readonly db: Database.Database) {}

  /** Prepared once per connection: the status resource is read often. */
  private prepare(sql: string): Database.Statement {
    let cache = STATEMENTS.get(this.db);
    if (!cache) STATEMENTS.set(this.db, (cache = new Map()));
    let stmt = cache.get(sql);
    if (!stmt) cache.set(sql, (stmt = this.db.prepare(sql)));
    return stmt;
  }

  insert(o: NewOrder): Order {
    const row = this.prepare(
      `INSERT INTO orders (request_id, request_hash, operation_id, customer_id, email, lines, total_cents,
           inventory_mode, boundary, status, created_at, decided_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`,
    ).get(
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
    ) as OrderRow;
    return toOrder(row);
  }

  byId(id: number): Order | null {
    const row = this.prepare('SELECT * FROM orders WHERE id = ?').get(id) as OrderRow | undefined;
    return row ? toOrder(row) : null;
  }

  byRequestId(requestId: string): Order | null {
    const row = this.prepare('SELECT * FROM orders WHERE request_id = ?').get(requestId) as
      OrderRow | undefined;
    return row ? toOrder(row) : null;
  }

  byOperationId(operationId: string): Order | null {
    const row = this.prepare('SELECT * FROM orders WHERE operation_id = ?').get(operationId) as
      OrderRow | undefined;
    return row ? toOrder(row) : null;
  }

  /** Orders by operation id, in one statement (the load tracker reads hundreds at a time). */
  byOperationIds(operationIds: readonly string[]): Order[] {
    const rows = this.prepare(
      'SELECT * FROM orders WHERE operation_id IN (SELECT value FROM json_each(?))',
    ).all(JSON.stringify(operationIds)) as OrderRow[];
    return rows.map(toOrder);
  }

  /** The command links of many orders, in one statement. */
  commandsOfMany(orderIds: readonly number[]): Map<number, { fact: FactName; commandId: string }[]> {
    const rows = this.prepare(
      `SELECT order_id AS orderId, fact, command_id AS commandId FROM order_command
       WHERE order_id IN (SELECT value FROM json_each(?)) ORDER BY rowid`,
    ).all(JSON.stringify(orderIds)) as { orderId: number; fact: FactName; commandId: string }[];
    const links = new Map<number, { fact: FactName; commandId: string }[]>();
    for (const r of rows) {
      const list = links.get(r.orderId) ?? [];
      list.push({ fact: r.fact, commandId: r.commandId });
      links.set(r.orderId, list);
    }
    return links;
  }

  /** Takes `quantity` of a locally stocked product; false when there is not enough. */
  reserveStock(sku: string, quantity: number): boolean {
    return (
      this.prepare('UPDATE stock SET available = available - ? WHERE sku = ? AND available >= ?').run(
        quantity,
        sku,
        quantity,
      ).changes === 1
    );
  }

  /**
   * AWAITING_INVENTORY → CONFIRMED | REJECTED, once: returns the decided order, or null when it was
   * already decided (a re-delivered confirmation must not decide twice).
   */
  decide(id: number, status: 'CONFIRMED' | 'REJECTED', reason: string | null, at: number): Order | null {
    const row = this.prepare(
      `UPDATE orders SET status = ?, reject_reason = ?, decided_at = ?, version = version + 1
         WHERE id = ? AND status = 'AWAITING_INVENTORY' RETURNING *`,
    ).get(status, reason, at, id) as OrderRow | undefined;
    return row ? toOrder(row) : null;
  }

  markInlineFailure(id: number, fact: FactName): void {
    this.prepare('UPDATE orders SET inline_failure = ? WHERE id = ?').run(fact, id);
  }

  linkCommand(orderId: number, fact: FactName, commandId: string): void {
    this.prepare(
      `INSERT INTO order_command (order_id, fact, command_id) VALUES (?, ?, ?)
         ON CONFLICT (order_id, fact) DO UPDATE SET command_id = excluded.command_id`,
    ).run(orderId, fact, commandId);
  }

  commandsOf(orderId: number): { fact: FactName; commandId: string }[] {
    return this.prepare(
      'SELECT fact, command_id AS commandId FROM order_command WHERE order_id = ? ORDER BY rowid',
    ).all(orderId) as { fact: FactName; commandId: string }[];
  }

  /** Applies an order to the customer read model once per (order, version). */
  applyProjection(order: {
    orderId: number;
    version: number;
    customerId: string;
    totalCents: number;
  }): boolean {
    const fresh =
      this.prepare('INSERT OR IGNORE INTO projection_applied (order_id, version) VALUES (?, ?)').run(
        order.orderId,
        order.version,
      ).changes === 1;
    if (fresh) {
      this.prepare(
        `INSERT INTO customer_projection (customer_id, orders, total_cents, last_order_id) VALUES (?, 1, ?, ?)
           ON CONFLICT (customer_id) DO UPDATE SET orders = orders + 1,
             total_cents = total_cents + excluded.total_cents, last_order_id = excluded.last_order_id`,
      ).run(order.customerId, order.totalCents, order.orderId);
    }
    return fresh;
  }
}
