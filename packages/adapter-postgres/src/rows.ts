import { recordFromRow } from '@asynccmd/core/store-kit';
import type { RowDecoding, StoredCommandRow } from '@asynccmd/core/store-kit';
import type { CommandRecord } from '@asynccmd/core';
import type { CustomTypesConfig } from 'pg';

/** A command row as the store's queries return it: every column as text (see `RAW_TYPES`). */
export type CommandRow = StoredCommandRow<string, string, string> & { readonly id: string };

/**
 * The store parses its own rows from text instead of trusting pg's global type parsers, which
 * applications often change (`setTypeParser(20, parseInt)` would corrupt ids beyond 2^53).
 */
export const RAW_TYPES: CustomTypesConfig = {
  getTypeParser: (() => (text: string) => text) as unknown as CustomTypesConfig['getTypeParser'],
};

const DECODING: RowDecoding<string, string, string> = {
  time: toDate,
  count: Number,
  flag: (text) => text === 't',
};

export function toRecord(row: CommandRow): CommandRecord {
  return recordFromRow(row, DECODING);
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
