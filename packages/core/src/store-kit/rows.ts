import { readAttemptHistory } from '../attempt-history.js';
import type { CommandHeaders, CommandId, CommandRecord } from '../command.js';
import { encodeListCursor } from '../input-checks.js';
import type { ListPage, OutcomeCount, StatsRow } from '../ports/store.js';
import type { CommandStatus } from '../status.js';

/**
 * A command row as an adapter's statements return it, its columns named as the tables name them,
 * each in the database's own encoding: `Time` for the time columns, `Count` for the integer ones,
 * `Flag` for the boolean one.
 */
export interface StoredCommandRow<Time, Count, Flag> {
  readonly id: string | number | bigint;
  readonly type: string;
  readonly biz_key: string | null;
  readonly payload: string;
  readonly status: string;
  readonly max_retry: Count;
  readonly retry_count: Count;
  readonly rescue_count: Count;
  readonly next_run_at: Time;
  readonly last_error: string | null;
  readonly owner: string | null;
  readonly claim_token: string | null;
  readonly lease_until: Time | null;
  readonly idempotent: Flag;
  readonly headers: string;
  readonly created_at: Time;
  readonly updated_at: Time;
  readonly started_at: Time | null;
  readonly finished_at: Time | null;
  readonly retry_count_at_retry: Count;
  readonly rescue_count_at_retry: Count;
  readonly claimed_by: string | null;
  readonly history: string | null;
  readonly priority: Count;
  readonly ordering_key: string | null;
  /** JSON text; absent where a statement does not read it (the claims: a claimed row has none). */
  readonly result?: string | null;
  /** The latest progress report (both null before any); absent where a statement does not read them (the claims). */
  readonly progress_done?: Count | null;
  readonly progress_total?: Count | null;
}

/** How an adapter reads its encodings of times, counts and the flag. */
export interface RowDecoding<Time, Count, Flag> {
  time(value: Time): Date;
  count(value: Count): number;
  flag(value: Flag): boolean;
}

/** A row → the command it holds. The status column's CHECK constraint admits only the five statuses. */
export function recordFromRow<Time, Count, Flag>(
  row: StoredCommandRow<Time, Count, Flag>,
  decode: RowDecoding<Time, Count, Flag>,
): CommandRecord {
  const status = row.status as CommandStatus;
  const time = (value: Time | null): Date | null => (value === null ? null : decode.time(value));
  const startedAt = time(row.started_at);
  const finishedAt = time(row.finished_at);
  const running = status === 'RUNNING';
  return {
    id: String(row.id),
    type: row.type,
    bizKey: row.biz_key,
    payload: JSON.parse(row.payload) as unknown,
    status,
    maxRetry: decode.count(row.max_retry),
    retryCount: decode.count(row.retry_count),
    rescueCount: decode.count(row.rescue_count),
    retryCountAtRetry: decode.count(row.retry_count_at_retry),
    rescueCountAtRetry: decode.count(row.rescue_count_at_retry),
    nextRunAt: decode.time(row.next_run_at),
    priority: decode.count(row.priority),
    orderingKey: row.ordering_key,
    lastError: row.last_error,
    owner: row.owner,
    claimedBy: row.claimed_by,
    history: readAttemptHistory(row.history, { status, startedAt, finishedAt, claimedBy: row.claimed_by }),
    // A row that is not RUNNING may keep an old claim's token and lease (a requeued PENDING row),
    // or a marker in the token column (MySQL's completion): shown only while RUNNING.
    claimToken: running ? row.claim_token : null,
    leaseUntil: running ? time(row.lease_until) : null,
    idempotent: decode.flag(row.idempotent),
    headers: JSON.parse(row.headers) as CommandHeaders,
    createdAt: decode.time(row.created_at),
    updatedAt: decode.time(row.updated_at),
    startedAt,
    finishedAt,
    result: row.result == null ? null : (JSON.parse(row.result) as unknown),
    progress:
      row.progress_done == null || row.progress_total == null
        ? null
        : { done: decode.count(row.progress_done), total: decode.count(row.progress_total) },
  };
}

/** Ids are decimal text of 64-bit integers: compared by length first, then as text. */
export function compareIds(a: CommandId, b: CommandId): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** Claim order: priority (lower first), then nextRunAt, then id. */
export function byClaimOrder(a: CommandRecord, b: CommandRecord): number {
  return a.priority - b.priority || a.nextRunAt.getTime() - b.nextRunAt.getTime() || compareIds(a.id, b.id);
}

/** The ids among `asked` that `done` holds: in the callers' order, each id once. */
export function inCallersOrder(asked: readonly CommandId[], done: Iterable<CommandId>): CommandId[] {
  const held = done instanceof Set ? (done as ReadonlySet<CommandId>) : new Set(done);
  return [...new Set(asked)].filter((id) => held.has(id));
}

/**
 * A list page from the rows a list statement returned for `limit` (asked for `limit + 1`: one
 * more row than the page says a next page exists); its cursor is core's list cursor.
 */
export function listPage<R>(
  rows: readonly R[],
  limit: number,
  toRecord: (row: R) => CommandRecord,
): ListPage {
  const items = rows.slice(0, limit).map(toRecord);
  const last = items[items.length - 1];
  return { items, nextCursor: rows.length > limit && last ? encodeListCursor(last) : null };
}

/** A row of an outcome-count statement: status, latency_bucket and count, counts in any numeric encoding. */
export interface OutcomeCountRow {
  readonly status: 'SUCCESS' | 'DEAD';
  readonly latency_bucket: string | number;
  readonly count: string | number | bigint;
}

export function outcomeCountsFromRows(rows: readonly OutcomeCountRow[]): OutcomeCount[] {
  return rows.map((r) => ({
    status: r.status,
    latencyBucket: Number(r.latency_bucket),
    count: Number(r.count),
  }));
}

/** A row of a counts statement: status, type and count, the count in any numeric encoding. */
export interface StatsCountRow {
  readonly status: CommandStatus;
  readonly type: string;
  readonly count: string | number | bigint;
}

export function statsRowsFromRows(rows: readonly StatsCountRow[]): StatsRow[] {
  return rows.map((r) => ({ status: r.status, type: r.type, count: Number(r.count) }));
}
