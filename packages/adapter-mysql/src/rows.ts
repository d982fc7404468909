import { recordFromRow } from '@asynccmd/core/store-kit';
import type { RowDecoding, StoredCommandRow } from '@asynccmd/core/store-kit';
import type { CommandRecord, CommandStatus } from '@asynccmd/core';

/**
 * A row as the store's queries return it: ids and DATETIMEs as text (see connection.ts), counts
 * as numbers or numeric text, the flag 0 or 1.
 */
export type CommandRow = StoredCommandRow<string, string | number, string | number> & {
  readonly status: CommandStatus;
};

const DECODING: RowDecoding<string, string | number, string | number> = {
  time: fromUtcText,
  count: Number,
  flag: (v) => Number(v) === 1,
};

export function toRecord(row: CommandRow): CommandRecord {
  return recordFromRow(row, DECODING);
}

/**
 * 'YYYY-MM-DD HH:MM:SS.mmm' as DATETIME(3) holds it: always UTC here. Read digit by digit: a
 * claimed row carries five of these, and parsing them as date text costs several times more.
 */
export function fromUtcText(text: string): Date {
  const ms = datetimeMs(text);
  const d = new Date(Number.isNaN(ms) ? `${text.replace(' ', 'T')}Z` : ms);
  if (Number.isNaN(d.getTime()))
    throw new Error(`unreadable DATETIME from the database: ${JSON.stringify(text)}`);
  return d;
}

/** Epoch ms of 'YYYY-MM-DD HH:MM:SS' with up to six fraction digits (milliseconds kept); else NaN. */
function datetimeMs(text: string): number {
  const n = text.length;
  if (n < 19 || n === 20 || n > 26) return NaN;
  if (text[4] !== '-' || text[7] !== '-' || text[10] !== ' ' || text[13] !== ':' || text[16] !== ':')
    return NaN;
  if (n > 19 && text[19] !== '.') return NaN;
  const month = digits(text, 5, 7);
  const day = digits(text, 8, 10);
  const hour = digits(text, 11, 13);
  const minute = digits(text, 14, 16);
  const second = digits(text, 17, 19);
  const fraction = n > 19 ? digits(text, 20, n) : 0;
  const year = digits(text, 0, 4);
  if (year < 1000 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59) return NaN;
  if (second > 59 || fraction < 0) return NaN;
  const millis = n <= 23 ? fraction * 10 ** (23 - Math.max(n, 20)) : Math.floor(fraction / 10 ** (n - 23));
  return Date.UTC(year, month - 1, day, hour, minute, second, millis);
}

/** The decimal number text[from, to) spells; -1 when a character there is not a digit. */
function digits(text: string, from: number, to: number): number {
  let value = 0;
  for (let i = from; i < to; i++) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return -1;
    value = value * 10 + digit;
  }
  return value;
}

/** A Date as DATETIME(3) text in UTC, bound as a parameter (never subject to a time-zone setting). */
export function toUtcText(d: Date): string {
  return d.toISOString().slice(0, 23).replace('T', ' ');
}
