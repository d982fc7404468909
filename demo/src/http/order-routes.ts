import type { IncomingMessage, ServerResponse } from 'node:http';
import type { InlineOutcome } from '../domain/inline-order-service.js';
import type { Order } from '../domain/order.js';
import { validateOrderRequest, type OrderRequest } from '../domain/order-request.js';
import { operationUri, orderUri, type OperationView } from '../domain/operation-view.js';
import { HttpError, readJson, sendJson } from './json.js';

/** One side of the experiment's boundary: the split (commands) or all-synchronous. */
export interface OrderBoundary {
  readonly name: 'split' | 'synchronous';
  accept(request: OrderRequest): Promise<InlineOutcome>;
  operation(operationId: string): Promise<OperationView | null>;
  /** The operation of an order it has just accepted, as the accepting transaction committed it. */
  accepted(order: Order): OperationView;
  operations(operationIds: readonly string[]): Promise<OperationView[]>;
  order(orderId: number): Promise<{ order: Order; operation: OperationView } | null>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TERMINAL_STATES = ['completed', 'follow_up_failed', 'rejected', 'cancelled'];

/**
 * POST /orders. 201 Created when the order's core facts hold at the response (validated, priced,
 * stock reserved, recorded): the order exists, only follow-ups are pending. 202 Accepted when the
 * stock can only be confirmed by the supplier: the order is not yet a fact, the client follows the
 * operation (seed 2, §3.1; RFC 9110 §15.3.3).
 */
export async function postOrder(
  boundary: OrderBoundary,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const body = await readJson(req);
  const key = req.headers['idempotency-key'];
  const validated = validateOrderRequest(body, Array.isArray(key) ? key[0] : key);
  if (!validated.ok) {
    throw new HttpError(
      400,
      'invalid_request',
      `the order request is invalid: ${validated.problems.map((p) => `${p.field} ${p.problem}`).join('; ')}`,
      validated.problems,
    );
  }
  const outcome = await boundary.accept(validated.value);
  switch (outcome.kind) {
    case 'out-of-stock':
      throw new HttpError(
        409,
        'out_of_stock',
        `not enough ${outcome.sku} in stock for ${outcome.quantity}; no order was created`,
      );
    case 'supplier-refused':
      throw new HttpError(409, 'supplier_refused', `${outcome.reason}; no order was created`);
    case 'request-id-reused':
      throw new HttpError(
        422,
        'request_id_reused',
        `request id ${JSON.stringify(outcome.requestId)} was already used for order ${outcome.orderId} with a different request`,
      );
    case 'downstream-failed':
      // The all-synchronous variant's honest answer when a downstream fails mid-request; note that
      // the order may exist anyway, which the client cannot know (an "invisible state").
      throw new HttpError(502, 'downstream_failed', `${outcome.message} while establishing ${outcome.fact}`);
    case 'accepted':
      return respondAccepted(boundary, outcome.order, outcome.replayed, res);
  }
}

async function respondAccepted(
  boundary: OrderBoundary,
  order: Order,
  replayed: boolean,
  res: ServerResponse,
): Promise<void> {
  // A fresh answer says what the accepting transaction established, never what a follow-up that
  // started at its commit did since; a replay answers with the current facts.
  const view = replayed ? await boundary.operation(order.operationId) : boundary.accepted(order);
  if (!view) throw new Error(`operation ${order.operationId} vanished`);
  const statusUri = operationUri(order.operationId);
  const replay: Record<string, string> = replayed ? { 'idempotent-replayed': 'true' } : {};
  const common = {
    operationId: order.operationId,
    orderId: order.id,
    state: view.state,
    completedFacts: view.completedFacts,
    pendingFacts: view.pendingFacts,
    statusUri,
  };
  if (order.inventoryMode === 'local' || order.boundary === 'inline') {
    sendJson(
      res,
      201,
      {
        ...common,
        orderCreated: true,
        inventoryStatus: 'RESERVED',
        links: { order: orderUri(order.id), operation: statusUri },
      },
      { location: orderUri(order.id), ...replay },
    );
    return;
  }
  sendJson(
    res,
    202,
    {
      ...common,
      orderCreated: false,
      inventoryStatus: order.status === 'AWAITING_INVENTORY' ? 'PENDING_CONFIRMATION' : order.status,
      nextCheck: `GET ${statusUri} until terminal is true`,
      terminalStates: TERMINAL_STATES,
      links: { operation: statusUri },
    },
    { location: statusUri, 'retry-after': '1', ...replay },
  );
}

export async function getOperation(boundary: OrderBoundary, id: string, res: ServerResponse): Promise<void> {
  if (!UUID.test(id))
    throw new HttpError(400, 'invalid_id', `${JSON.stringify(id.slice(0, 64))} is not an operation id`);
  const view = await boundary.operation(id);
  if (!view) throw new HttpError(404, 'not_found', `operation ${id} does not exist`);
  sendJson(res, 200, view);
}

export async function getOrder(boundary: OrderBoundary, id: string, res: ServerResponse): Promise<void> {
  if (!/^[1-9][0-9]{0,15}$/.test(id))
    throw new HttpError(400, 'invalid_id', `${JSON.stringify(id.slice(0, 64))} is not an order id`);
  const found = await boundary.order(Number(id));
  if (!found) throw new HttpError(404, 'not_found', `order ${id} does not exist`);
  const { order, operation } = found;
  sendJson(res, 200, {
    orderId: order.id,
    status: order.status,
    version: order.version,
    customerId: order.customerId,
    lines: order.lines,
    totalCents: order.totalCents,
    inventoryMode: order.inventoryMode,
    rejectReason: order.rejectReason,
    createdAt: new Date(order.createdAt).toISOString(),
    operation,
  });
}
