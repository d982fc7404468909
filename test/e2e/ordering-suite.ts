import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { CommandStore, NewCommand } from '@asynccmd/core';
import type { RuntimeHarness, RuntimeHarnessFactory } from './harness.js';
import { lineOf, spawnWorker, stopWorkers, waitFor } from './worker-processes.js';

const WORKER = fileURLToPath(new URL('./ordering-worker.mjs', import.meta.url));
const TYPE = 'e2e.keyed';

export interface OrderingScenario {
  readonly commands: number;
  readonly keys: number;
  readonly workers: number;
}

interface Execution {
  readonly event: 'start' | 'end';
  readonly id: string;
  readonly key: string;
  readonly seq: number;
  readonly pid: number;
}

function readLog(path: string): Execution[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      const [event, id, key, seq, pid] = l.split(' ');
      return { event: event as Execution['event'], id: id!, key: key!, seq: Number(seq), pid: Number(pid) };
    });
}

async function succeeded(store: CommandStore): Promise<number> {
  const stats = await store.stats(new Date());
  return stats.counts
    .filter((c) => c.type === TYPE && c.status === 'SUCCESS')
    .reduce((n, c) => n + c.count, 0);
}

/**
 * Ordering keys end to end: worker processes drain keyed commands from one table; every execution
 * is recorded outside the queue table (an append-only file), and the record must show each key's
 * commands one at a time, in submission order, while different keys ran at the same time.
 */
export function describeOrderingE2E<Tx>(
  name: string,
  harnessFactory: RuntimeHarnessFactory<Tx>,
  scenario: OrderingScenario,
): void {
  describe(`ordering keys end to end on ${name}`, () => {
    let harness: RuntimeHarness<Tx> | null = null;
    const children: ChildProcess[] = [];
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-ordering-'));
    afterAll(async () => {
      for (const child of children) child.kill('SIGKILL');
      await harness?.dispose();
      rmSync(dir, { recursive: true, force: true });
    });

    it(`${scenario.commands} commands over ${scenario.keys} keys, drained by ${scenario.workers} processes: one at a time and in submission order per key, in parallel across keys`, async () => {
      harness = await harnessFactory(`ord_${process.pid}_${Math.floor(Math.random() * 1e6)}`);
      const store = (await harness.openStore()) as CommandStore<Tx>;
      const log = join(dir, 'executions.log');
      const ready: Promise<void>[] = [];
      for (let w = 0; w < scenario.workers; w++) {
        const child = spawnWorker(WORKER, {
          store: harness.workerStore,
          type: TYPE,
          log,
          pollIntervalMs: 20,
          concurrency: 4,
          workMs: 3,
        });
        children.push(child);
        ready.push(lineOf(child, 'ready'));
      }
      await Promise.all(ready);

      // Submitted in order, in batches: key k's commands in increasing seq (and id) order.
      const submitted = new Map<string, string[]>();
      const BATCH = 100;
      for (let start = 0; start < scenario.commands; start += BATCH) {
        const batch: NewCommand[] = [];
        for (let i = start; i < Math.min(start + BATCH, scenario.commands); i++) {
          const key = `order-${i % scenario.keys}`;
          batch.push({
            type: TYPE,
            payloadJson: JSON.stringify({ key, seq: i }),
            maxRetry: 3,
            orderingKey: key,
          });
        }
        const ids = await store.transaction((tx) => store.insert(tx, batch));
        ids.forEach((id, n) => {
          const key = `order-${(start + n) % scenario.keys}`;
          submitted.set(key, [...(submitted.get(key) ?? []), id]);
        });
      }
      await waitFor(
        'every command to succeed',
        async () => (await succeeded(store)) === scenario.commands,
        240_000,
      );
      await stopWorkers(children);

      const executions = readLog(log);
      const starts = executions.filter((e) => e.event === 'start');
      // Every command ran, once (no failures or lost leases were made to happen).
      expect(starts).toHaveLength(scenario.commands);
      expect(new Set(starts.map((e) => e.id)).size).toBe(scenario.commands);
      // Per key: in submission order, and each one ended before the next began.
      const open = new Map<string, Execution>();
      const order = new Map<string, string[]>();
      let overlapAcrossKeys = 0;
      for (const e of executions) {
        if (e.event === 'start') {
          expect(open.get(e.key), `${e.key}: ${e.id} started while another of the key ran`).toBeUndefined();
          if (open.size > 0) overlapAcrossKeys += 1;
          open.set(e.key, e);
          order.set(e.key, [...(order.get(e.key) ?? []), e.id]);
        } else {
          expect(open.get(e.key)?.id, `${e.key}: ${e.id} ended`).toBe(e.id);
          open.delete(e.key);
        }
      }
      expect(new Map([...order].sort())).toEqual(new Map([...submitted].sort()));
      // Different keys ran at the same time, in several processes.
      expect(overlapAcrossKeys).toBeGreaterThan(0);
      expect(new Set(starts.map((e) => e.pid)).size).toBeGreaterThan(1);
    }, 300_000);
  });
}
