import { readAttemptHistory } from '@asynccmd/core';
import type { CommandHeaders, CommandRecord, CommandStatus } from '@asynccmd/core';

/** A row as the store's queries return it: ids and DATETIMEs as text (see connection.ts). */
export interface CommandRow {
  readonly id: string;
  readonly type: string;
  readonly biz_key: string | null;
  readonly payload: string;
  readonly status: CommandStatus;
  readonly max_retry: number;
  readonly retry_count: number;
  readonly rescue_count: number;
  readonly next_run_at: string;
  readonly last_error: string | null;
  readonly owner: string | null;
  readonly claim_token: string | null;
  readonly lease_until: string | null;
  readonly idempotent: number;
  readonly headers: string;
  readonly created_at: string;
  readonly updated_at: string;
  readonly started_at: string | null;
  readonly finished_at: string | null;
  readonly retry_count_at_retry: number;
  readonly rescue_count_at_retry: number;
  readonly claimed_by: string | null;
  readonly history: string | null;
}

export function toRecord(row: CommandRow): CommandRecord {
  const status = row.status;
  const startedAt = optionalTime(row.started_at);
  const finishedAt = optionalTime(row.finished_at);
  return {
    id: String(row.id),
    type: row.type,
    bizKey: row.biz_key,
    payload: JSON.parse(row.payload) as unknown,
    status,
    maxRetry: Number(row.max_retry),
    retryCount: Number(row.retry_count),
    rescueCount: Number(row.rescue_count),
    retryCountAtRetry: Number(row.retry_count_at_retry),
    rescueCountAtRetry: Number(row.rescue_count_at_retry),
    nextRunAt: fromUtcText(row.next_run_at),
    lastError: row.last_error,
    owner: row.owner,
    claimedBy: row.claimed_by,
    history: readAttemptHistory(row.history, { status, startedAt, finishedAt, claimedBy: row.claimed_by }),
    // A SUCCESS row carries its completion's marker there (sql.ts says why): a token only while RUNNING.
    claimToken: row.status === 'RUNNING' ? row.claim_token : null,
    leaseUntil: row.status === 'RUNNING' ? optionalTime(row.lease_until) : null,
    idempotent: Number(row.idempotent) === 1,
    headers: JSON.parse(row.headers) as CommandHeaders,
    createdAt: fromUtcText(row.created_at),
    updatedAt: fromUtcText(row.updated_at),
    startedAt,
    finishedAt,
  };
}

/** 'YYYY-MM-DD HH:MM:SS.mmm' as DATETIME(3) holds it: always UTC here. */
export function fromUtcText(text: string): Date {
  const d = new Date(`${text.replace(' ', 'T')}Z`);
  if (Number.isNaN(d.getTime()))
    throw new Error(`unreadable DATETIME from the database: ${JSON.stringify(text)}`);
  return d;
}

function optionalTime(text: string | null): Date | null {
  return text === null ? null : fromUtcText(text);
}

/** A Date as DATETIME(3) text in UTC, bound as a parameter (never subject to a time-zone setting). */
export function toUtcText(d: Date): string {
  return d.toISOString().slice(0, 23).replace('T', ' ');
}
