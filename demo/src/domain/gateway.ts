import type Database from 'better-sqlite3';
import type { CommandRecord } from '@asynccmd/core';
import type { OrderPayloads } from './payloads.js';

export type OrderCommandName = keyof OrderPayloads;

/**
 * What the order service needs from asynccmd, in its own words: a transaction on the shared SQLite
 * connection that dispatches IMMEDIATE commands after it commits, an idempotent submit inside it,
 * and a read of command rows. `runtime-wiring.ts` implements it with @asynccmd/runtime.
 */
export interface CommandGateway {
  transaction<T>(fn: (tx: Database.Database) => Promise<T>): Promise<T>;
  submitIdempotent<K extends OrderCommandName>(
    tx: Database.Database,
    type: K,
    payload: OrderPayloads[K],
    options: { readonly bizKey: string; readonly runAt?: Date },
  ): Promise<{ readonly id: string; readonly duplicate: boolean }>;
  getMany(ids: readonly string[]): Promise<CommandRecord[]>;
}
