import { readAttemptHistory } from '@asynccmd/core';
import type { CommandHeaders, CommandRecord, CommandStatus } from '@asynccmd/core';

/** A row as the statements in sql.ts return it. */
export interface CommandRow {
  readonly id: string;
  readonly type: string;
  readonly biz_key: string | null;
  readonly payload: string;
  readonly status: string;
  readonly max_retry: number;
  readonly retry_count: number;
  readonly rescue_count: number;
  readonly next_run_at: number;
  readonly last_error: string | null;
  readonly owner: string | null;
  readonly claim_token: string | null;
  readonly lease_until: number | null;
  readonly idempotent: number;
  readonly headers: string;
  readonly created_at: number;
  readonly updated_at: number;
  readonly started_at: number | null;
  readonly finished_at: number | null;
  readonly retry_count_at_retry: number;
  readonly rescue_count_at_retry: number;
  readonly claimed_by: string | null;
  readonly history: string;
}

export function toRecord(row: CommandRow): CommandRecord {
  // The CHECK constraint on the column admits only the five statuses.
  const status = row.status as CommandStatus;
  const startedAt = toDate(row.started_at);
  const finishedAt = toDate(row.finished_at);
  return {
    id: row.id,
    type: row.type,
    bizKey: row.biz_key,
    payload: JSON.parse(row.payload) as unknown,
    status,
    maxRetry: row.max_retry,
    retryCount: row.retry_count,
    rescueCount: row.rescue_count,
    retryCountAtRetry: row.retry_count_at_retry,
    rescueCountAtRetry: row.rescue_count_at_retry,
    nextRunAt: new Date(row.next_run_at),
    lastError: row.last_error,
    owner: row.owner,
    claimedBy: row.claimed_by,
    history: readAttemptHistory(row.history, { status, startedAt, finishedAt, claimedBy: row.claimed_by }),
    // A requeued PENDING row keeps its old claim's token and lease (sql.ts says why): shown only while RUNNING.
    claimToken: status === 'RUNNING' ? row.claim_token : null,
    leaseUntil: status === 'RUNNING' ? toDate(row.lease_until) : null,
    idempotent: row.idempotent === 1,
    headers: JSON.parse(row.headers) as CommandHeaders,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
    startedAt,
    finishedAt,
  };
}

function toDate(ms: number | null): Date | null {
  return ms === null ? null : new Date(ms);
}

/** Claim order: nextRunAt, then id (ids compared as the 64-bit integers they are). */
export function byDueThenId(a: CommandRecord, b: CommandRecord): number {
  return a.nextRunAt.getTime() - b.nextRunAt.getTime() || compareIds(a.id, b.id);
}

export function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}
