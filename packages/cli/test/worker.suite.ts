import type { CommandStore } from '@asynccmd/core';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OpsDatabase } from '../../runtime/test/ops/admin-http.suite.js';
import { submit } from '../../runtime/test/ops/support.js';
import { spawnWorker, WORKER_FIXTURES } from './worker-process.js';

const TOKEN = 'worker-admin-token-0123456789';
const EXECUTORS = join(WORKER_FIXTURES, 'worker-executors.mjs');

/** Polls `condition` every 50 ms; fails with `what` after `timeoutMs`. */
export async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 20_000) {
  const until = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The JSON lines the fixture's executors appended to `file` (none when it is not there yet). */
export function recorded(
  file: string,
): { type: string; id: string; n?: number; tick?: string; pid: number }[] {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { type: string; id: string; n?: number; tick?: string; pid: number });
}

async function countRunning(store: CommandStore): Promise<number> {
  return (await store.list({ status: ['RUNNING'], limit: 1000 })).items.length;
}

/** `asynccmd worker` as a real process against one real database. */
export function describeWorker(name: string, open: () => Promise<OpsDatabase>): void {
  describe(`asynccmd worker on ${name}`, () => {
    let db: OpsDatabase;
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-worker-'));

    beforeAll(async () => {
      db = await open();
    });
    afterAll(async () => {
      await db?.dispose();
      rmSync(dir, { recursive: true, force: true });
    });

    it('runs the module’s executors, serves /health and /metrics, and stops cleanly on SIGTERM', async () => {
      const record = join(dir, 'echo.jsonl');
      const worker = spawnWorker(
        [
          '--db',
          db.url,
          ...db.cliArgs,
          'worker',
          '--executors',
          EXECUTORS,
          '--concurrency',
          '4',
          '--admin-port',
          '0',
        ],
        { ASYNCCMD_TEST_RECORD: record, ASYNCCMD_ADMIN_TOKEN: TOKEN },
      );
      try {
        const admin = await worker.started;
        expect(admin).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
        for (let n = 0; n < 20; n++) await submit(db.store, 'worker.echo', { payload: { n } });
        await waitFor('20 commands executed', () => recorded(record).length >= 20);
        const ns = recorded(record)
          .map((r) => r.n)
          .sort((a, b) => (a ?? 0) - (b ?? 0));
        expect(ns).toEqual([...Array(20).keys()]);

        const health = await fetch(`${admin}/health`);
        expect(health.status).toBe(200);
        expect(await health.json()).toMatchObject({ status: 'UP' });
        expect((await fetch(`${admin}/metrics`)).status).toBe(401);
        const metrics = await fetch(`${admin}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
        expect(metrics.status).toBe(200);
        expect(await metrics.text()).toMatch(
          /^asynccmd_commands_succeeded_total\{type="worker\.echo"\} 20$/m,
        );

        // SIGTERM while commands run: the worker waits for them, then exits 0.
        for (let n = 100; n < 104; n++)
          await submit(db.store, 'worker.echo', { payload: { n, sleepMs: 1_500 } });
        await waitFor('commands running', async () => (await countRunning(db.store)) > 0);
        worker.child.kill('SIGTERM');
        expect(await worker.exited).toBe(0);
        expect(worker.stderr()).toBe('');
        expect(await countRunning(db.store)).toBe(0);
        const finished = recorded(record).filter((r) => (r.n ?? 0) >= 100);
        expect(finished.length).toBeGreaterThan(0);
        const rows = (await db.store.list({ type: 'worker.echo', limit: 1000 })).items;
        // Each command ran to its end (SUCCESS) or was handed back unstarted (PENDING): none is stuck.
        expect(rows.filter((r) => r.status === 'SUCCESS')).toHaveLength(recorded(record).length);
        expect(rows.every((r) => r.status === 'SUCCESS' || r.status === 'PENDING')).toBe(true);
        const log = worker.log();
        expect(log.map((l) => l.msg)).toEqual(
          expect.arrayContaining(['asynccmd worker started', 'asynccmd worker stopped']),
        );
        for (const line of log)
          expect(line).toMatchObject({ time: expect.any(String), level: expect.any(String) });
      } finally {
        worker.child.kill('SIGKILL');
      }
    });
  });
}
