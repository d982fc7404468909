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

/** 'YYYY-MM-DD HH:MM:SS.mmm' as DATETIME(3) holds it: always UTC here. */
export function fromUtcText(text: string): Date {
  const d = new Date(`${text.replace(' ', 'T')}Z`);
  if (Number.isNaN(d.getTime()))
    throw new Error(`unreadable DATETIME from the database: ${JSON.stringify(text)}`);
  return d;
}

/** A Date as DATETIME(3) text in UTC, bound as a parameter (never subject to a time-zone setting). */
export function toUtcText(d: Date): string {
  return d.toISOString().slice(0, 23).replace('T', ' ');
}
