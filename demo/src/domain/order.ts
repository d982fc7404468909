import type { InventoryMode } from './catalog.js';

export type OrderStatus = 'CONFIRMED' | 'AWAITING_INVENTORY' | 'REJECTED';

export interface OrderLine {
  readonly sku: string;
  readonly quantity: number;
  readonly unitPriceCents: number;
}

/** An order row. */
export interface Order {
  readonly id: number;
  readonly requestId: string | null;
  readonly requestHash: string;
  readonly operationId: string;
  readonly customerId: string;
  readonly email: string;
  readonly lines: readonly OrderLine[];
  readonly totalCents: number;
  readonly inventoryMode: InventoryMode;
  readonly boundary: 'commands' | 'inline';
  readonly status: OrderStatus;
  /** Bumped by every change of the order's facts; command payloads carry the version they saw. */
  readonly version: number;
  readonly createdAt: number;
  readonly decidedAt: number | null;
  readonly rejectReason: string | null;
  readonly inlineFailure: string | null;
}
