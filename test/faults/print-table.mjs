// Prints the fault suite's table from the rows the last run of each database's file saved in
// .tmp/faults/ (see results.ts), one table for all databases.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';

const dir = fileURLToPath(new URL('../../.tmp/faults/', import.meta.url));
const rows = existsSync(dir)
  ? readdirSync(dir)
      .filter((f) => f.endsWith('.json'))
      .flatMap((f) => JSON.parse(readFileSync(dir + f, 'utf8')))
  : [];
const columns = [
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
rows.sort((a, b) => a.scenario.localeCompare(b.scenario) || a.database.localeCompare(b.database));
const out = [`| ${columns.join(' | ')} |`, `|${columns.map(() => ' --- ').join('|')}|`];
for (const r of rows) out.push(`| ${columns.map((c) => String(r[c])).join(' | ')} |`);
process.stdout.write(`\nfault suite, every database\n${out.join('\n')}\n`);
