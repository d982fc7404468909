import { createHash } from 'node:crypto';
import { findProduct } from './catalog.js';
import type { OrderLine } from './order.js';
import type { OrderRequest } from './order-request.js';

/** Prices the validated items from the catalog: the price is a fact fixed at acceptance. */
export function priceLines(request: OrderRequest): { lines: OrderLine[]; totalCents: number } {
  const lines = request.items.map((i) => ({
    sku: i.sku,
    quantity: i.quantity,
    unitPriceCents: findProduct(i.sku)?.priceCents ?? 0,
  }));
  return { lines, totalCents: lines.reduce((sum, l) => sum + l.quantity * l.unitPriceCents, 0) };
}

/**
 * Fingerprint of what a request asks for, so a request id reused for a different order is refused
 * instead of silently answered with the first order.
 */
export function requestHash(request: OrderRequest): string {
  const canonical = JSON.stringify({
    customerId: request.customerId,
    email: request.email,
    items: [...request.items].sort((a, b) => a.sku.localeCompare(b.sku)).map((i) => [i.sku, i.quantity]),
    inventoryConfirmation: request.inventoryConfirmation,
  });
  return createHash('sha256').update(canonical).digest('hex').slice(0, 32);
}
