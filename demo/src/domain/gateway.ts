import type { CommandRecord } from '@asynccmd/core';
import type { SqlSession } from '../db/sql.js';
import type { OrderPayloads } from './payloads.js';

export type OrderCommandName = keyof OrderPayloads;

/** An open transaction: the order service's SQL on it, and the adapter's handle asynccmd submits on. */
export interface TxSession extends SqlSession {
  readonly handle: unknown;
}

/**
 * A workflow of commands being put together in an open transaction: it is written by `submit()`,
 * in that transaction, and exists if and only if it commits. asynccmd's workflow builder.
 */
export interface OrderWorkflow {
  step<K extends OrderCommandName>(
    name: string,
    type: K,
    payload: OrderPayloads[K],
    options?: { readonly bizKey?: string; readonly runAt?: Date },
  ): this;
  /** The command id of each step, by name. */
  submit(): Promise<{ readonly steps: Readonly<Record<string, string>> }>;
}

/**
 * What the order service needs from asynccmd, in its own words: a transaction on the database of
 * the orders that dispatches IMMEDIATE commands after it commits, an idempotent submit and a
 * workflow inside it, and a read of command rows. `service.ts` implements it with @asynccmd/runtime.
 */
export interface CommandGateway {
  transaction<T>(fn: (tx: TxSession) => Promise<T>): Promise<T>;
  submitIdempotent<K extends OrderCommandName>(
    tx: TxSession,
    type: K,
    payload: OrderPayloads[K],
    options: { readonly bizKey: string; readonly runAt?: Date },
  ): Promise<{ readonly id: string; readonly duplicate: boolean }>;
  /** A workflow named `id` that `submit()` writes in `tx`. */
  workflow(tx: TxSession, id: string): OrderWorkflow;
  getMany(ids: readonly string[]): Promise<CommandRecord[]>;
}
