import { recordFromRow } from '@asynccmd/core/store-kit';
import type { RowDecoding, StoredCommandRow } from '@asynccmd/core/store-kit';
import type { CommandRecord } from '@asynccmd/core';

/** A row as the statements in sql.ts return it: times in epoch milliseconds, the flag 0 or 1. */
export type CommandRow = StoredCommandRow<number, number, number> & { readonly id: string };

const DECODING: RowDecoding<number, number, number> = {
  time: (ms) => new Date(ms),
  count: (n) => n,
  flag: (v) => v === 1,
};

export function toRecord(row: CommandRow): CommandRecord {
  return recordFromRow(row, DECODING);
}

/** A claimed row's values but those the claim wrote into every row (sql.ts CLAIMED_COLUMNS). */
type ClaimedRowValues = readonly [
  CommandRow['id'],
  CommandRow['type'],
  CommandRow['biz_key'],
  CommandRow['max_retry'],
  CommandRow['retry_count'],
  CommandRow['rescue_count'],
  CommandRow['next_run_at'],
  CommandRow['last_error'],
  CommandRow['owner'],
  CommandRow['lease_until'],
  CommandRow['idempotent'],
  CommandRow['headers'],
  CommandRow['created_at'],
  CommandRow['updated_at'],
  CommandRow['started_at'],
  CommandRow['finished_at'],
  CommandRow['retry_count_at_retry'],
  CommandRow['rescue_count_at_retry'],
  CommandRow['history'],
  CommandRow['priority'],
  CommandRow['ordering_key'],
  /** has_dependants (0 or 1). */
  number,
];

/** What a claim wrote into every row it returns: RUNNING under its token, claimed by its instance. */
export interface ClaimWrites {
  readonly token: string;
  readonly instance: string | null;
}

/**
 * The record of a claimed row read in raw mode (its JSON array of values, its payload), and
 * whether the command has dependants.
 */
export function toRecordFromClaim(
  row: readonly unknown[],
  claim: ClaimWrites,
): { readonly record: CommandRecord; readonly hasDependants: boolean } {
  const [
    id,
    type,
    biz_key,
    max_retry,
    retry_count,
    rescue_count,
    next_run_at,
    last_error,
    owner,
    lease_until,
    idempotent,
    headers,
    created_at,
    updated_at,
    started_at,
    finished_at,
    retry_count_at_retry,
    rescue_count_at_retry,
    history,
    priority,
    ordering_key,
    has_dependants,
  ] = JSON.parse(row[0] as string) as ClaimedRowValues;
  const record = toRecord({
    id,
    type,
    biz_key,
    payload: row[1] as string,
    status: 'RUNNING',
    max_retry,
    retry_count,
    rescue_count,
    next_run_at,
    last_error,
    owner,
    claim_token: claim.token,
    lease_until,
    idempotent,
    headers,
    created_at,
    updated_at,
    started_at,
    finished_at,
    retry_count_at_retry,
    rescue_count_at_retry,
    claimed_by: claim.instance,
    history,
    priority,
    ordering_key,
  });
  return { record, hasDependants: has_dependants === 1 };
}
