// `db`: the application's Kysely instance, with its `orders` table.
import type { Kysely } from 'kysely';

export declare const db: Kysely<{ orders: { id: string; status: string } }>;
