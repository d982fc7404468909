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
