import { seededRandom } from '../stats.js';

export interface GeneratedRequest {
  readonly body: Record<string, unknown>;
  readonly idempotencyKey: string;
  /** What the mix meant it to be, for the summary. */
  readonly intent: 'local' | 'made-to-order' | 'supplier-flag' | 'invalid';
}

/**
 * The request mix of the built-in load and of both experiment variants (seed 2, §5: fixed
 * request mix). Deterministic for a seed: both variants get exactly the same requests.
 * ~85 % local stock (201), ~8 % made-to-order and ~4 % with the supplier flag (202; one in ten of
 * the made-to-order ones asks more than the supplier can make), ~3 % invalid (400).
 */
export function requestMix(count: number, seed: number, runId: string): GeneratedRequest[] {
  const random = seededRandom(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
  const teas = ['tea-green', 'tea-black', 'mug'];
  return Array.from({ length: count }, (_, i) => {
    const customerId = `customer-${1 + Math.floor(random() * 60)}`;
    const email = `${customerId}@example.test`;
    const lines = teas.filter(() => random() < 0.5);
    const items = (lines.length ? lines : [pick(teas)]).map((sku) => ({
      sku,
      quantity: 1 + Math.floor(random() * 3),
    }));
    const idempotencyKey = `${runId}-${i}`;
    const roll = random();
    if (roll < 0.03) {
      const broken =
        random() < 0.5
          ? { customerId, items }
          : { customerId, email, items: [{ sku: 'tea-green', quantity: 0 }] };
      return { body: broken, idempotencyKey, intent: 'invalid' };
    }
    if (roll < 0.11) {
      const quantity = random() < 0.1 ? 45 : 1 + Math.floor(random() * 4);
      return {
        body: { customerId, email, items: [...items, { sku: 'custom-print', quantity }] },
        idempotencyKey,
        intent: 'made-to-order',
      };
    }
    if (roll < 0.15) {
      return {
        body: { customerId, email, items, inventoryConfirmation: 'downstream' },
        idempotencyKey,
        intent: 'supplier-flag',
      };
    }
    return { body: { customerId, email, items }, idempotencyKey, intent: 'local' };
  });
}
