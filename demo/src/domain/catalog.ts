/**
 * How the stock of a product is settled when an order is accepted:
 * - 'local': reserved in our own database inside the accepting transaction, so a 201 can promise it;
 * - 'downstream': only a supplier can confirm it (made to order), so the order is accepted with
 *   202 and the confirmation is a deferred command whose outcome decides the order.
 */
export type InventoryMode = 'local' | 'downstream';

export interface Product {
  readonly sku: string;
  readonly name: string;
  readonly priceCents: number;
  readonly inventoryMode: InventoryMode;
  /** Initial stock of a 'local' product. */
  readonly stock: number;
}

export const CATALOG: readonly Product[] = [
  { sku: 'tea-green', name: 'Green tea, 100 g', priceCents: 450, inventoryMode: 'local', stock: 1_000_000 },
  { sku: 'tea-black', name: 'Black tea, 100 g', priceCents: 390, inventoryMode: 'local', stock: 1_000_000 },
  { sku: 'mug', name: 'Stoneware mug', priceCents: 1_200, inventoryMode: 'local', stock: 1_000_000 },
  { sku: 'kettle', name: 'Kettle', priceCents: 3_900, inventoryMode: 'local', stock: 25 },
  {
    sku: 'custom-print',
    name: 'Mug with your own print (made to order)',
    priceCents: 2_500,
    inventoryMode: 'downstream',
    stock: 0,
  },
];

const BY_SKU: ReadonlyMap<string, Product> = new Map(CATALOG.map((p) => [p.sku, p]));

export function findProduct(sku: string): Product | undefined {
  return BY_SKU.get(sku);
}
