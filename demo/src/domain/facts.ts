/**
 * The business facts of an order (seed 2, §3.1): a response lists which already hold
 * (`completedFacts`) and which are still owed (`pendingFacts`), instead of a vague `success: true`.
 */
export type FactName =
  | 'order.recorded'
  | 'price.fixed'
  | 'inventory.reserved'
  | 'inventory.confirmed'
  | 'user.notified'
  | 'external.synced'
  | 'projection.updated';

/** The command types of the deferred actions, one per fact that is settled after the response. */
export const COMMAND_TYPES = {
  confirmInventory: 'order.confirm-inventory',
  notifyUser: 'order.notify-user',
  syncExternal: 'order.sync-external',
  updateProjection: 'order.update-projection',
} as const;

export type OrderCommandType = (typeof COMMAND_TYPES)[keyof typeof COMMAND_TYPES];

export const FACT_OF_COMMAND: Readonly<Record<OrderCommandType, FactName>> = {
  'order.confirm-inventory': 'inventory.confirmed',
  'order.notify-user': 'user.notified',
  'order.sync-external': 'external.synced',
  'order.update-projection': 'projection.updated',
};

/** Facts that hold when the order is accepted, by how its stock is settled. */
export const FACTS_AT_ACCEPTANCE = {
  local: ['order.recorded', 'price.fixed', 'inventory.reserved'],
  downstream: ['order.recorded', 'price.fixed'],
} as const satisfies Record<string, readonly FactName[]>;

/** The follow-up facts every confirmed order owes. */
export const FOLLOW_UP_FACTS: readonly FactName[] = [
  'user.notified',
  'external.synced',
  'projection.updated',
];

/**
 * The workflow of a confirmed order's follow-ups (its admin status resource: `/workflows/<id>`):
 * one per order version, named after it.
 */
export function followUpsId(order: { readonly id: number; readonly version: number }): string {
  return `order-${order.id}-v${order.version}`;
}
