import type { Pool } from 'pg';
import type { BatchStep } from './batch.js';

/** A store transaction: READ COMMITTED whatever the session's default, as the claim statements need. */
export const BEGIN = 'BEGIN ISOLATION LEVEL READ COMMITTED';
/**
 * The store transaction's BEGIN and COMMIT as statements prepared once per connection, so the
 * server does not parse them again for every transaction. The names are the store's own (pg's
 * queries and the application never use them); a COMMIT prepared this way still ends an aborted
 * transaction, as the server lets transaction-ending statements through.
 */
export const BEGIN_STEP = { name: 'asynccmd_begin_read_committed', text: BEGIN } as const;
export const COMMIT_STEP = { name: 'asynccmd_commit', text: 'COMMIT' } as const;

/** How a pool's transactions begin and end. */
export interface TransactionSteps {
  readonly begin: BatchStep;
  readonly commit: BatchStep;
}

const PREPARED: TransactionSteps = { begin: BEGIN_STEP, commit: COMMIT_STEP };
const UNNAMED: TransactionSteps = { begin: { text: BEGIN }, commit: { text: 'COMMIT' } };

/**
 * Pools whose connections go through a transaction pooler (PgBouncer `pool_mode = transaction`):
 * consecutive transactions may run on different server connections, so a statement prepared in
 * one is missing (or, under the same name, already there) in the next. Their transactions use
 * unnamed statements only.
 */
const pooled = new WeakSet<Pool>();

/** Marks `pool` as reached through a transaction pooler (see `pooled`). */
export function throughTransactionPooler(pool: Pool): void {
  pooled.add(pool);
}

export function transactionSteps(pool: Pool): TransactionSteps {
  return pooled.has(pool) ? UNNAMED : PREPARED;
}
