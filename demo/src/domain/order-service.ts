import { randomUUID } from 'node:crypto';
import { isUniqueViolation, type SqlSession } from '../db/sql.js';
import { COMMAND_TYPES, FACT_OF_COMMAND, followUpsId } from './facts.js';
import type { CommandGateway, OrderCommandName, OrderWorkflow, TxSession } from './gateway.js';
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
    readonly db: SqlSession,
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
        const existing = request.requestId === null ? null : await repo.byRequestId(request.requestId);
        if (existing) return replay(existing, hash);
        const mode = inventoryModeOf(request);
        const { lines, totalCents } = priceLines(request);
        const order = await repo.insert({
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
        if (mode === 'local') {
          await this.submitFollowUps(tx, order);
          // The stock rows are the few rows every order writes: reserved last, they stay locked
          // only until the COMMIT right after (on PostgreSQL and MySQL the next order of the same
          // product waits for that lock). Not enough stock rolls the order and its commands back.
          // In SKU order: two orders of the same products never wait for each other crosswise.
          for (const l of [...lines].sort((a, b) => a.sku.localeCompare(b.sku)))
            if (!(await repo.reserveStock(l.sku, l.quantity))) throw new OutOfStock(l.sku, l.quantity);
        } else {
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
          ? await this.orders.byRequestId(request.requestId)
          : null;
      if (raced) return replay(raced, hash);
      throw error;
    }
  }

  /**
   * The follow-ups every confirmed order owes, as one workflow (`followUpsId(order)`) of three
   * independent steps, snapshots of the confirmed version: written in the accepting transaction
   * (local stock) or in the supplier confirmation's own (`ctx.workflow`), so they exist if and only
   * if it commits. `open` is the workflow builder of that transaction (default: the gateway's, on `tx`).
   */
  async submitFollowUps(
    tx: TxSession,
    order: Order,
    open: (id: string) => OrderWorkflow = (id) => this.commands.workflow(tx, id),
  ): Promise<void> {
    const base = snapshot(order);
    // The bizKey (tracing only, on a workflow's steps) names the order version they speak for.
    const bizKey = versionKey(order);
    const delay = this.options.projectionDelayMs ?? 0;
    const { steps } = await open(followUpsId(order))
      .step(
        STEP_OF_TYPE[COMMAND_TYPES.notifyUser],
        COMMAND_TYPES.notifyUser,
        {
          ...base,
          email: order.email,
          totalCents: order.totalCents,
          itemCount: order.lines.reduce((n, l) => n + l.quantity, 0),
        },
        { bizKey },
      )
      .step(
        STEP_OF_TYPE[COMMAND_TYPES.syncExternal],
        COMMAND_TYPES.syncExternal,
        {
          ...base,
          customerId: order.customerId,
          lines: order.lines,
          totalCents: order.totalCents,
        },
        { bizKey },
      )
      .step(
        STEP_OF_TYPE[COMMAND_TYPES.updateProjection],
        COMMAND_TYPES.updateProjection,
        { ...base, customerId: order.customerId, totalCents: order.totalCents },
        delay > 0 ? { bizKey, runAt: new Date(Date.now() + delay) } : { bizKey },
      )
      .submit();
    const repo = new OrderRepository(tx);
    for (const [type, step] of Object.entries(STEP_OF_TYPE) as [OrderCommandName, string][]) {
      const id = steps[step];
      if (id !== undefined) await repo.linkCommand(order.id, FACT_OF_COMMAND[type], id);
    }
  }

  private async submit<K extends OrderCommandName>(
    tx: TxSession,
    order: Order,
    type: K,
    payload: OrderPayloads[K],
    runAt?: Date,
  ): Promise<void> {
    // One command per (action, order version): a retried request cannot double it.
    const bizKey = versionKey(order);
    const { id } = await this.commands.submitIdempotent(
      tx,
      type,
      payload,
      runAt ? { bizKey, runAt } : { bizKey },
    );
    await new OrderRepository(tx).linkCommand(order.id, FACT_OF_COMMAND[type], id);
  }

  async operation(operationId: string): Promise<OperationView | null> {
    const order = await this.orders.byOperationId(operationId);
    return order ? this.viewOf(order) : null;
  }

  /** Many operations at once: three statements whatever their number. */
  async operations(operationIds: readonly string[]): Promise<OperationView[]> {
    const orders = await this.orders.byOperationIds(operationIds);
    const links = await this.orders.commandsOfMany(orders.map((o) => o.id));
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
    const links = await this.orders.commandsOf(order.id);
    const commands = await this.commands.getMany(links.map((l) => l.commandId));
    return buildOperationView(order, links, commands, { adminBase: this.options.adminBase ?? '/admin' });
  }
}

/** The steps of the follow-ups' workflow, by command type. */
const STEP_OF_TYPE = {
  [COMMAND_TYPES.notifyUser]: 'notify-user',
  [COMMAND_TYPES.syncExternal]: 'sync-external',
  [COMMAND_TYPES.updateProjection]: 'update-projection',
} as const satisfies Partial<Record<OrderCommandName, string>>;

/** The key of what is submitted for one order version (the follow-ups' workflow is named so too). */
function versionKey(order: Pick<Order, 'id' | 'version'>): string {
  return followUpsId(order);
}

function snapshot(order: Order) {
  return { contract: 1 as const, operationId: order.operationId, orderId: order.id, version: order.version };
}

function replay(existing: Order, hash: string): AcceptOutcome {
  return existing.requestHash === hash
    ? { kind: 'accepted', order: existing, replayed: true }
    : { kind: 'request-id-reused', requestId: existing.requestId ?? '', orderId: existing.id };
}
