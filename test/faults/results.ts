import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** One line of the fault suite's table. */
export interface ResultRow {
  readonly scenario: string;
  readonly database: string;
  readonly committed: number;
  readonly lost: number;
  readonly twice: number;
  readonly stuck: number;
  /** Executions begun but never finished (killed with their process, or aborted). */
  readonly interrupted: number;
  readonly fenced: number;
  readonly recovery: string;
  readonly note: string;
}

/** Where each database's rows of the last run are kept, for print-table.mjs to gather. */
export const RESULTS_DIR = fileURLToPath(new URL('../../.tmp/faults/', import.meta.url));

const COLUMNS: readonly (keyof ResultRow)[] = [
  'scenario',
  'database',
  'committed',
  'lost',
  'twice',
  'stuck',
  'interrupted',
  'fenced',
  'recovery',
  'note',
];

/** A Markdown table, so it can be pasted into the documentation as it is. */
export function formatTable(rows: readonly ResultRow[]): string {
  const lines = [`| ${COLUMNS.join(' | ')} |`, `|${COLUMNS.map(() => ' --- ').join('|')}|`];
  for (const r of rows) lines.push(`| ${COLUMNS.map((c) => String(r[c])).join(' | ')} |`);
  return lines.join('\n');
}

export function printTable(title: string, rows: readonly ResultRow[]): void {
  if (rows.length === 0) return;
  process.stdout.write(`\n${title}\n${formatTable(rows)}\n\n`);
}

export function saveResults(database: string, rows: readonly ResultRow[]): void {
  mkdirSync(RESULTS_DIR, { recursive: true });
  writeFileSync(`${RESULTS_DIR}${database}.json`, JSON.stringify(rows, null, 2));
}
