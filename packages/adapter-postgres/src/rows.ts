import { recordFromRow } from '@asynccmd/core/store-kit';
import type { CheckedCommand, RowDecoding, StoredCommandRow } from '@asynccmd/core/store-kit';
import type { CommandRecord } from '@asynccmd/core';

/** A command row as the store's queries return it: every column as text (connection.ts). */
export type CommandRow = StoredCommandRow<string, string, string> & { readonly id: string };

const DECODING: RowDecoding<string, string, string> = {
  time: toDate,
  count: Number,
  flag: (text) => text === 't',
};

export function toRecord(row: CommandRow): CommandRecord {
  return recordFromRow(row, DECODING);
}

/** A row of claimDue (sql.ts CLAIMED_COLUMNS): without what the claim wrote and the store knows. */
export type ClaimedRow = Omit<CommandRow, 'status' | 'claim_token' | 'claimed_by' | 'updated_at'>;

/**
 * A claimDue row → the command it claimed, with the claim's own values put back: RUNNING under
 * `token` for `instance`, updated when it started (the claim writes both from one clock reading).
 * The full row is a new object of one fixed shape, never the driver's object with four columns
 * added: pg's Result gives each query's rows a shape of their own, and adding properties to them
 * cost about 13 µs of CPU per row (a type-limited claim, whose rows come from pg's Result).
 */
export function claimedRecord(row: ClaimedRow, token: string, instance: string | null): CommandRecord {
  return recordFromRow(
    {
      id: row.id,
      type: row.type,
      biz_key: row.biz_key,
      payload: row.payload,
      status: 'RUNNING',
      max_retry: row.max_retry,
      retry_count: row.retry_count,
      rescue_count: row.rescue_count,
      next_run_at: row.next_run_at,
      last_error: row.last_error,
      owner: row.owner,
      claim_token: token,
      lease_until: row.lease_until,
      idempotent: row.idempotent,
      headers: row.headers,
      created_at: row.created_at,
      updated_at: row.started_at ?? '',
      started_at: row.started_at,
      finished_at: row.finished_at,
      retry_count_at_retry: row.retry_count_at_retry,
      rescue_count_at_retry: row.rescue_count_at_retry,
      claimed_by: instance,
      history: row.history,
      priority: row.priority,
      ordering_key: row.ordering_key,
    },
    DECODING,
  );
}

// Postgres's ISO output: 2026-11-30 05:31:11.123+00, 2026-11-30 05:31:11+05:30, …
const ISO =
  /^(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?$/;

/** A timestamptz in text form → Date, at millisecond precision (the columns hold no more). */
export function toDate(text: string): Date {
  const fast = wholeHourOffsetMillis(text);
  if (fast !== null) return new Date(fast);
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

/**
 * The usual form — a four-digit year and a whole-hour offset, `2026-11-30 05:31:11.12+00` — read
 * by position: a claim decodes several timestamps per row, and the regular expression costs more
 * than the rest of the row. Null for any other form (toDate's regular expression reads those).
 */
function wholeHourOffsetMillis(t: string): number | null {
  const n = t.length;
  const sign = t.charCodeAt(n - 3);
  if (n < 22 || n > 29 || (sign !== PLUS && sign !== MINUS)) return null;
  if (t.charCodeAt(4) !== DASH || t.charCodeAt(7) !== DASH || t.charCodeAt(10) !== SPACE) return null;
  if (t.charCodeAt(13) !== COLON || t.charCodeAt(16) !== COLON) return null;
  let ms = 0;
  if (n > 22) {
    if (n === 23 || t.charCodeAt(19) !== DOT) return null;
    const frac = digitsAt(t, 20, n - 3);
    if (frac < 0) return null;
    ms = Math.floor(frac / 10 ** Math.max(0, n - 26)) * 10 ** Math.max(0, 26 - n);
  }
  const y = digitsAt(t, 0, 4);
  const mo = digitsAt(t, 5, 7);
  const d = digitsAt(t, 8, 10);
  const h = digitsAt(t, 11, 13);
  const mi = digitsAt(t, 14, 16);
  const s = digitsAt(t, 17, 19);
  const oh = digitsAt(t, n - 2, n);
  if ((y | mo | d | h | mi | s | oh) < 0) return null;
  const offset = oh * 3_600_000;
  const utc = Date.UTC(y, mo - 1, d, h, mi, s, ms);
  return sign === PLUS ? utc - offset : utc + offset;
}

const [PLUS, MINUS, DASH, SPACE, COLON, DOT, ZERO] = [43, 45, 45, 32, 58, 46, 48];

/** The decimal number in t[from, to), or -1 if a character there is not a digit. */
function digitsAt(t: string, from: number, to: number): number {
  let value = 0;
  for (let i = from; i < to; i++) {
    const digit = t.charCodeAt(i) - ZERO;
    if (digit < 0 || digit > 9) return -1;
    value = value * 10 + digit;
  }
  return value;
}

/**
 * One command's values in the order of the single-row insert statements' parameters ($1–$9: the
 * store's inserts and the schedules' tick insert, which adds its own after them).
 */
export function rowParams(v: CheckedCommand): unknown[] {
  return [
    v.type,
    v.bizKey,
    v.payloadJson,
    v.maxRetry,
    v.runAt?.toISOString() ?? null,
    v.owner,
    v.headersJson,
    v.priority,
    v.orderingKey,
  ];
}
