import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { CommandStore, NewCommand } from '@asynccmd/core';
import type { RuntimeHarness, RuntimeHarnessFactory, WorkerStoreSpec } from './harness.js';
import { lineOf, spawnWorker, stopWorkers, waitFor } from './worker-processes.js';

const WORKER = fileURLToPath(new URL('./type-limits-worker.mjs', import.meta.url));
const TYPE = 'e2e.limited';

export interface TypeLimitScenario {
  /** Commands inserted by the test (claimed by the workers' poll loops). */
  readonly inserted: number;
  /** Commands each worker submits itself (claimed by id after commit, where the limit allows). */
  readonly submittedPerWorker: number;
  readonly workers: number;
  readonly limit: number;
  /** The store worker `w` opens (default: the harness's, for every worker). */
  readonly workerStoreFor?: (w: number) => WorkerStoreSpec;
}

async function countOf(store: CommandStore, status: 'RUNNING' | 'SUCCESS'): Promise<number> {
  const stats = await store.stats(new Date());
  return stats.counts.filter((c) => c.type === TYPE && c.status === status).reduce((n, c) => n + c.count, 0);
}

/**
 * A per-type limit end to end: worker processes, each with room for more than the limit, drain one
 * limited type from one table, polled and claimed by id after their own submits. Every execution's
 * start and end is appended to a file outside the queue table, and the test samples the RUNNING
 * count in the table meanwhile: neither ever shows more than the limit, and every command finishes.
 */
export function describeTypeLimitE2E<Tx>(
  name: string,
  harnessFactory: RuntimeHarnessFactory<Tx>,
  scenario: TypeLimitScenario,
): void {
  describe(`type limit end to end on ${name}`, () => {
    let harness: RuntimeHarness<Tx> | null = null;
    const children: ChildProcess[] = [];
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-limits-'));
    afterAll(async () => {
      for (const child of children) child.kill('SIGKILL');
      await harness?.dispose();
      rmSync(dir, { recursive: true, force: true });
    });

    const total = scenario.inserted + scenario.workers * scenario.submittedPerWorker;
    it(`${total} commands of a type limited to ${scenario.limit}, run by ${scenario.workers} processes: never more than ${scenario.limit} at once (sampled), all finish`, async () => {
      harness = await harnessFactory(`lim_${process.pid}_${Math.floor(Math.random() * 1e6)}`);
      const store = (await harness.openStore()) as CommandStore<Tx>;
      const sampler = (await harness.openStore()) as CommandStore<Tx>;
      const log = join(dir, 'executions.log');
      const ready: Promise<void>[] = [];
      const submitted: Promise<void>[] = [];
      for (let w = 0; w < scenario.workers; w++) {
        const child = spawnWorker(
          WORKER,
          {
            store: scenario.workerStoreFor?.(w) ?? harness.workerStore,
            type: TYPE,
            limit: scenario.limit,
            log,
            pollIntervalMs: 20,
            concurrency: 4,
            workMs: 20,
            submits: scenario.submittedPerWorker,
          },
          true,
        );
        children.push(child);
        ready.push(lineOf(child, 'ready'));
        submitted.push(lineOf(child, 'submitted'));
      }
      await Promise.all(ready);

      // Sampled from outside the workers until every command succeeded.
      let done = false;
      let samples = 0;
      let mostRunning = 0;
      const sampling = (async () => {
        while (!done) {
          mostRunning = Math.max(mostRunning, await countOf(sampler, 'RUNNING'));
          samples += 1;
          await sleep(3);
        }
      })();

      try {
        const batch: NewCommand[] = Array.from({ length: scenario.inserted }, (_, i) => ({
          type: TYPE,
          payloadJson: JSON.stringify({ i }),
          maxRetry: 3,
        }));
        await store.transaction((tx) => store.insert(tx, batch));
        for (const child of children) child.stdin?.write('go\n');
        await Promise.all(submitted);
        await waitFor(
          'every command to succeed',
          async () => (await countOf(store, 'SUCCESS')) === total,
          240_000,
        );
      } finally {
        done = true;
        await sampling;
      }
      await stopWorkers(children);

      const lines = readFileSync(log, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => l.split(' '));
      const starts = lines.filter(([event]) => event === 'start');
      // Every command ran, once (no failures or lost leases were made to happen).
      expect(starts).toHaveLength(total);
      expect(new Set(starts.map(([, id]) => id)).size).toBe(total);
      // Replayed in the order the lines were appended: never more than the limit at once.
      let running = 0;
      let mostInLog = 0;
      for (const [event] of lines) {
        running += event === 'start' ? 1 : -1;
        mostInLog = Math.max(mostInLog, running);
      }
      expect(running).toBe(0);
      expect(mostInLog).toBeLessThanOrEqual(scenario.limit);
      expect(mostRunning).toBeLessThanOrEqual(scenario.limit);
      expect(samples).toBeGreaterThan(0);
      // The limit, not one process, is what held them back: several ran at once, in several processes.
      expect(mostInLog).toBeGreaterThan(1);
      expect(new Set(starts.map(([, , pid]) => pid)).size).toBeGreaterThan(1);
    }, 300_000);
  });
}
