import { readAttemptHistory } from '@asynccmd/core';
import type { CommandHeaders, CommandRecord, CommandStatus } from '@asynccmd/core';
import type { CustomTypesConfig } from 'pg';

/** A command row as the store's queries return it: every column as text (see `RAW_TYPES`). */
export interface CommandRow {
  readonly id: string;
  readonly type: string;
  readonly biz_key: string | null;
  readonly payload: string;
  readonly status: string;
  readonly max_retry: string;
  readonly retry_count: string;
  readonly rescue_count: string;
  readonly next_run_at: string;
  readonly last_error: string | null;
  readonly owner: string | null;
  readonly claim_token: string | null;
  readonly lease_until: string | null;
  readonly idempotent: string;
  readonly headers: string;
  readonly created_at: string;
  readonly updated_at: string;
  readonly started_at: string | null;
  readonly finished_at: string | null;
  readonly retry_count_at_retry: string;
  readonly rescue_count_at_retry: string;
  readonly claimed_by: string | null;
  readonly history: string;
}

/**
 * The store parses its own rows from text instead of trusting pg's global type parsers, which
 * applications often change (`setTypeParser(20, parseInt)` would corrupt ids beyond 2^53).
 */
export const RAW_TYPES: CustomTypesConfig = {
  getTypeParser: (() => (text: string) => text) as unknown as CustomTypesConfig['getTypeParser'],
};

export function toRecord(row: CommandRow): CommandRecord {
  const status = row.status as CommandStatus;
  const startedAt = toDateOrNull(row.started_at);
  const finishedAt = toDateOrNull(row.finished_at);
  return {
    id: row.id,
    type: row.type,
    bizKey: row.biz_key,
    payload: JSON.parse(row.payload) as unknown,
    status,
    maxRetry: Number(row.max_retry),
    retryCount: Number(row.retry_count),
    rescueCount: Number(row.rescue_count),
    retryCountAtRetry: Number(row.retry_count_at_retry),
    rescueCountAtRetry: Number(row.rescue_count_at_retry),
    nextRunAt: toDate(row.next_run_at),
    lastError: row.last_error,
    owner: row.owner,
    claimedBy: row.claimed_by,
    history: readAttemptHistory(row.history, { status, startedAt, finishedAt, claimedBy: row.claimed_by }),
    // A requeued PENDING row keeps its old claim's token and lease (sql.ts says why): shown only while RUNNING.
    claimToken: status === 'RUNNING' ? row.claim_token : null,
    leaseUntil: status === 'RUNNING' ? toDateOrNull(row.lease_until) : null,
    idempotent: row.idempotent === 't',
    headers: JSON.parse(row.headers) as CommandHeaders,
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
    startedAt,
    finishedAt,
  };
}

// Postgres's ISO output: 2026-11-30 05:31:11.123+00, 2026-11-30 05:31:11+05:30, …
const ISO =
  /^(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?$/;

/** A timestamptz in text form → Date, at millisecond precision (the columns hold no more). */
export function toDate(text: string): Date {
  const m = ISO.exec(text);
  if (!m) {
    const d = new Date(text);
    if (Number.isNaN(d.getTime())) throw new Error(`unreadable timestamp from PostgreSQL: ${text}`);
    return d;
  }
  const [, y, mo, d, h, mi, s, frac, sign, oh, om, os] = m;
  const ms = frac ? Number(frac.padEnd(3, '0').slice(0, 3)) : 0;
  const utc = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), ms);
  const offset = (Number(oh) * 3600 + Number(om ?? 0) * 60 + Number(os ?? 0)) * 1000;
  return new Date(sign === '+' ? utc - offset : utc + offset);
}

function toDateOrNull(text: string | null): Date | null {
  return text === null ? null : toDate(text);
}

/** Ids are decimal text: compare by length first. */
export function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}
