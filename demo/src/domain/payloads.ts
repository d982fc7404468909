import type { OrderLine } from './order.js';

/**
 * Command payloads are input snapshots (seed 2, §3.2): the order id and the version the action was
 * decided on, plus the facts the action needs, copied at submit time. Never a live object, never
 * the HTTP request: the command may run in another process minutes later, after the order changed.
 * `contract` versions the payload shape so an old row is still understood after a deploy.
 */
interface Snapshot {
  readonly contract: 1;
  readonly operationId: string;
  readonly orderId: number;
  readonly version: number;
}

export interface ConfirmInventoryPayload extends Snapshot {
  readonly lines: readonly Pick<OrderLine, 'sku' | 'quantity'>[];
}

/** The notification says what was confirmed at submit time, even if the order changes later. */
export interface NotifyUserPayload extends Snapshot {
  readonly email: string;
  readonly totalCents: number;
  readonly itemCount: number;
}

export interface SyncExternalPayload extends Snapshot {
  readonly customerId: string;
  readonly lines: readonly OrderLine[];
  readonly totalCents: number;
}

export interface UpdateProjectionPayload extends Snapshot {
  readonly customerId: string;
  readonly totalCents: number;
}

export interface OrderPayloads {
  readonly 'order.confirm-inventory': ConfirmInventoryPayload;
  readonly 'order.notify-user': NotifyUserPayload;
  readonly 'order.sync-external': SyncExternalPayload;
  readonly 'order.update-projection': UpdateProjectionPayload;
}

/**
 * The idempotency key of one side effect towards a downstream: the same action for the same order
 * version is the same effect, however often the command is delivered.
 */
export function effectKey(
  action: string,
  snapshot: { readonly orderId: number; readonly version: number },
): string {
  return `${action}:${snapshot.orderId}:v${snapshot.version}`;
}
