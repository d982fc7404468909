// A second instance, as its own OS process: once told to go, migrates the shared SQLite file
// (mode `migrate`) or claims and completes commands of one type until none is left (mode `claim`),
// then prints what it did. Runs the built adapter (`tsc -b` first), exactly as an application would.
import { randomUUID } from 'node:crypto';
import process from 'node:process';
import { createInterface } from 'node:readline';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';

const [mode, file, type] = process.argv.slice(2);
const store = createSqliteStore({ filename: file });
const lines = createInterface({ input: process.stdin });
process.stdout.write('ready\n');
await new Promise((resolve) => lines.once('line', resolve));
lines.close();

async function claimUntilEmpty() {
  const claimed = [];
  let completed = 0;
  let rounds = 0;
  for (;;) {
    const token = randomUUID();
    const batch = await store.claimDue({
      types: [type],
      limit: 1 + (rounds % 13),
      now: new Date(Date.now() + 60_000),
      token,
      leaseMs: 600_000,
    });
    rounds += 1;
    if (batch.length === 0) return { claimed, completed, rounds };
    for (const c of batch) claimed.push(c.id);
    completed += (await store.complete(batch.map((c) => ({ id: c.id, token })))).length;
  }
}

const report = mode === 'migrate' ? (await store.migrate(), { migrated: true }) : await claimUntilEmpty();
await store.close();
process.stdout.write(`${JSON.stringify(report)}\n`);
