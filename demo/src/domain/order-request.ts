import { findProduct, type InventoryMode } from './catalog.js';

/** A validated `POST /orders` body. */
export interface OrderRequest {
  /** The client's request id (Idempotency-Key header or `requestId` field); null when none was sent. */
  readonly requestId: string | null;
  readonly customerId: string;
  readonly email: string;
  readonly items: readonly { readonly sku: string; readonly quantity: number }[];
  /**
   * The request flag: 'downstream' asks for the supplier to confirm stock even for local products
   * (the 202 variant); absent = decided by the products (any made-to-order item → 'downstream').
   */
  readonly inventoryConfirmation: InventoryMode | null;
}

export interface FieldProblem {
  readonly field: string;
  readonly problem: string;
}

export type Validated =
  | { readonly ok: true; readonly value: OrderRequest }
  | { readonly ok: false; readonly problems: FieldProblem[] };

const ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;
const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,190}\.[^\s@]{2,}$/;
const MAX_ITEMS = 20;
const MAX_QUANTITY = 100;

/**
 * Checks everything that must hold before an order may exist (seed 2, §2: "validation failed → no
 * order"). Returns every problem at once so a client fixes its request in one go.
 */
export function validateOrderRequest(body: unknown, idempotencyKey: string | undefined): Validated {
  const problems: FieldProblem[] = [];
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { ok: false, problems: [{ field: '$', problem: 'the body must be a JSON object' }] };
  }
  const b = body as Record<string, unknown>;
  const known = new Set(['requestId', 'customerId', 'email', 'items', 'inventoryConfirmation']);
  for (const key of Object.keys(b)) {
    if (!known.has(key)) problems.push({ field: key, problem: 'is not a field of an order request' });
  }

  let requestId: string | null = null;
  if (b.requestId !== undefined && (typeof b.requestId !== 'string' || !ID.test(b.requestId))) {
    problems.push({ field: 'requestId', problem: 'must be 1–64 characters of letters, digits, . _ : -' });
  } else if (typeof b.requestId === 'string') {
    requestId = b.requestId;
  }
  if (idempotencyKey !== undefined) {
    if (!ID.test(idempotencyKey)) {
      problems.push({
        field: 'Idempotency-Key',
        problem: 'must be 1–64 characters of letters, digits, . _ : -',
      });
    } else if (requestId !== null && requestId !== idempotencyKey) {
      problems.push({ field: 'requestId', problem: 'differs from the Idempotency-Key header' });
    } else {
      requestId = idempotencyKey;
    }
  }

  if (typeof b.customerId !== 'string' || !ID.test(b.customerId)) {
    problems.push({
      field: 'customerId',
      problem: 'is required: 1–64 characters of letters, digits, . _ : -',
    });
  }
  if (typeof b.email !== 'string' || !EMAIL.test(b.email)) {
    problems.push({ field: 'email', problem: 'is required and must be an e-mail address' });
  }

  const items: { sku: string; quantity: number }[] = [];
  if (!Array.isArray(b.items) || b.items.length === 0 || b.items.length > MAX_ITEMS) {
    problems.push({ field: 'items', problem: `must be a list of 1–${MAX_ITEMS} items` });
  } else {
    const seen = new Set<string>();
    b.items.forEach((raw: unknown, i) => {
      const item = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
      if (typeof item.sku !== 'string' || findProduct(item.sku) === undefined) {
        problems.push({
          field: `items[${i}].sku`,
          problem: `is not a product we sell (${String(item.sku)})`,
        });
      } else if (seen.has(item.sku)) {
        problems.push({ field: `items[${i}].sku`, problem: 'appears twice; put the quantity on one line' });
      } else {
        seen.add(item.sku);
      }
      if (
        !Number.isInteger(item.quantity) ||
        (item.quantity as number) < 1 ||
        (item.quantity as number) > MAX_QUANTITY
      ) {
        problems.push({
          field: `items[${i}].quantity`,
          problem: `must be an integer from 1 to ${MAX_QUANTITY}`,
        });
      }
      if (typeof item.sku === 'string' && Number.isInteger(item.quantity)) {
        items.push({ sku: item.sku, quantity: item.quantity as number });
      }
    });
  }

  let inventoryConfirmation: InventoryMode | null = null;
  if (b.inventoryConfirmation !== undefined) {
    if (b.inventoryConfirmation !== 'local' && b.inventoryConfirmation !== 'downstream') {
      problems.push({ field: 'inventoryConfirmation', problem: "must be 'local' or 'downstream'" });
    } else {
      inventoryConfirmation = b.inventoryConfirmation;
    }
  }

  if (
    inventoryConfirmation === 'local' &&
    items.some((i) => findProduct(i.sku)?.inventoryMode === 'downstream')
  ) {
    problems.push({
      field: 'inventoryConfirmation',
      problem: "cannot be 'local': a made-to-order item needs the supplier to confirm stock",
    });
  }

  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
    value: {
      requestId,
      customerId: b.customerId as string,
      email: b.email as string,
      items,
      inventoryConfirmation,
    },
  };
}

/**
 * Where the stock fact is settled: a made-to-order product always needs the supplier (a product
 * setting), and the request flag can ask for the supplier too; otherwise stock is reserved locally.
 */
export function inventoryModeOf(request: OrderRequest): InventoryMode {
  if (request.inventoryConfirmation === 'downstream') return 'downstream';
  return request.items.some((i) => findProduct(i.sku)?.inventoryMode === 'downstream')
    ? 'downstream'
    : 'local';
}
