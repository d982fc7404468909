// `commands` (a runtime on a PostgreSQL store), `order` and `orderId`: what an ORM example submits
// beside. Compiled only: the ORM examples need a PostgreSQL database of their own.
import type { PoolClient } from 'pg';
import type { AsyncCommands } from '@asynccmd/runtime';

export declare const commands: AsyncCommands<{ 'order.ship': { orderId: string } }, PoolClient>;
export const orderId = 'o-42';
export const order = { id: orderId, status: 'PAID' };
