import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import { MIGRATIONS } from '../src/migrations.js';

const CLAIMER = join(dirname(fileURLToPath(import.meta.url)), 'claimer.mjs');

interface ClaimerReport {
  readonly claimed: string[];
  readonly completed: number;
  readonly rounds: number;
}

/** Starts a claimer process and resolves once it is ready; `go()` releases it, `report` is its result. */
async function startClaimer(file: string, type: string, mode: 'claim' | 'migrate' = 'claim') {
  const child = spawn(process.execPath, [CLAIMER, mode, file, type], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const lines = createInterface({ input: child.stdout });
  const output: string[] = [];
  const ready = new Promise<void>((resolve, reject) => {
    lines.on('line', (line) => (line === 'ready' ? resolve() : output.push(line)));
    child.once('exit', (code) => reject(new Error(`claimer exited early (${code}): ${stderr}`)));
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  await ready;
  return {
    go: () => child.stdin.write('go\n'),
    report: exited.then((code): ClaimerReport => {
      if (code !== 0) throw new Error(`claimer failed (${code}): ${stderr}`);
      return JSON.parse(output.join('')) as ClaimerReport;
    }),
  };
}

describe('sqlite: two processes on one file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'asynccmd-processes-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('migrate a fresh file at the same moment, and the schema is whole', async () => {
    const file = join(dir, 'fresh.db');
    const migrators = await Promise.all([1, 2, 3].map(() => startClaimer(file, 'unused', 'migrate')));
    for (const m of migrators) m.go();
    await Promise.all(migrators.map((m) => m.report));
    const store = createSqliteStore({ filename: file });
    try {
      await store.migrate();
      const versions = store.db
        .prepare('SELECT version FROM async_command_migrations ORDER BY version')
        .pluck()
        .all();
      expect(versions).toEqual(MIGRATIONS.map((m) => m.version));
      const [id] = await store.transaction((tx) =>
        store.insert(tx, [{ type: 't', payloadJson: '{}', maxRetry: 0 }]),
      );
      expect((await store.get(id!))?.status).toBe('PENDING');
    } finally {
      await store.close();
    }
  });

  it('never claim the same command twice, and together claim every one', async () => {
    const file = join(dir, 'shared.db');
    const store = createSqliteStore({ filename: file });
    try {
      await store.migrate();
      const type = 'shared.work';
      const n = 4000;
      const ids = await store.transaction((tx) =>
        store.insert(
          tx,
          Array.from({ length: n }, (_, i) => ({ type, payloadJson: JSON.stringify({ i }), maxRetry: 0 })),
        ),
      );
      const claimers = await Promise.all([startClaimer(file, type), startClaimer(file, type)]);
      for (const c of claimers) c.go();
      const reports = await Promise.all(claimers.map((c) => c.report));

      const all = reports.flatMap((r) => r.claimed);
      const doubleClaims = all.length - new Set(all).size;
      expect(doubleClaims).toBe(0);
      expect(new Set(all)).toEqual(new Set(ids));
      // Both processes took part, and every claim they made was completed under its token.
      for (const r of reports) expect(r.claimed.length).toBeGreaterThan(0);
      expect(reports.reduce((s, r) => s + r.completed, 0)).toBe(n);
      const { counts } = await store.stats(new Date());
      expect(counts).toEqual([{ status: 'SUCCESS', type, count: n }]);
    } finally {
      await store.close();
    }
  });
});
