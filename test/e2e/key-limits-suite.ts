import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { CommandStore, NewCommand } from '@asynccmd/core';
import type { RuntimeHarness, RuntimeHarnessFactory } from './harness.js';
import { lineOf, spawnWorker, stopWorkers, waitFor } from './worker-processes.js';

const WORKER = fileURLToPath(new URL('./key-limits-worker.mjs', import.meta.url));
const FAIR = 'e2e.fair';
const CAPPED = 'e2e.capped';

export interface KeyLimitScenario {
  readonly workers: number;
  /** The big tenant's backlog (fair share), submitted first. */
  readonly big: number;
  /** Small tenants behind it, and the commands of each. */
  readonly smallTenants: number;
  readonly perSmallTenant: number;
  /** Customers of the capped type, their commands each, and the most RUNNING per customer. */
  readonly customers: number;
  readonly perCustomerCommands: number;
  readonly perCustomer: number;
}

/** The execution log's lines so far, each split into its words (event, type, key, id, pid). */
function logLines(log: string): string[][] {
  let text: string;
  try {
    text = readFileSync(log, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.split(' '));
}

const command = (type: string, payload: object): NewCommand => ({
  type,
  payloadJson: JSON.stringify(payload),
  maxRetry: 3,
});

/**
 * Fair share and per-key concurrency end to end, at the runtime's default pools and queues: worker
 * processes drain, from one table, a big tenant's backlog with small tenants' commands behind it
 * (`fairShare`), and a type held to a few RUNNING per customer (`keyLimits`). Every execution's
 * start and end goes to a file outside the queue table; replayed in append order, it shows every
 * small tenant's commands starting before 5 % of the big tenant's, and never more than the limit
 * of one customer running at once. The test stops once the small tenants' commands have all
 * started and the capped type's have all run: the big backlog need not drain.
 */
export function describeKeyLimitE2E<Tx>(
  name: string,
  harnessFactory: RuntimeHarnessFactory<Tx>,
  scenario: KeyLimitScenario,
): void {
  describe(`fair share and key limits end to end on ${name}`, () => {
    let harness: RuntimeHarness<Tx> | null = null;
    const children: ChildProcess[] = [];
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-keys-'));
    afterAll(async () => {
      for (const child of children) child.kill('SIGKILL');
      await harness?.dispose();
      rmSync(dir, { recursive: true, force: true });
    });

    const small = Array.from({ length: scenario.smallTenants }, (_, i) => `small-${i}`);
    const customers = Array.from({ length: scenario.customers }, (_, i) => `c-${i}`);
    const cappedTotal = scenario.customers * scenario.perCustomerCommands;
    it(`${scenario.workers} processes: ${scenario.smallTenants} small tenants behind ${scenario.big} of a big one start before 5 % of it; never more than ${scenario.perCustomer} of a customer at once`, async () => {
      harness = await harnessFactory(`keys_${process.pid}_${Math.floor(Math.random() * 1e6)}`);
      const store = (await harness.openStore()) as CommandStore<Tx>;
      const log = join(dir, 'executions.log');
      const ready: Promise<void>[] = [];
      for (let w = 0; w < scenario.workers; w++) {
        const child = spawnWorker(WORKER, {
          store: harness.workerStore,
          fairType: FAIR,
          cappedType: CAPPED,
          perCustomer: scenario.perCustomer,
          log,
          pollIntervalMs: 20,
          workMs: 20,
        });
        children.push(child);
        ready.push(lineOf(child, 'ready'));
      }
      await Promise.all(ready);
      // One commit: the small tenants' commands are behind the big one's backlog from the start.
      const batch: NewCommand[] = [
        ...Array.from({ length: scenario.big }, (_, i) => command(FAIR, { tenant: 'big', i })),
        ...small.flatMap((tenant) =>
          Array.from({ length: scenario.perSmallTenant }, (_, i) => command(FAIR, { tenant, i })),
        ),
        ...Array.from({ length: scenario.perCustomerCommands }, (_, i) =>
          customers.map((customerId) => command(CAPPED, { customerId, i })),
        ).flat(),
      ];
      await store.transaction(async (tx) => {
        for (let i = 0; i < batch.length; i += 500) await store.insert(tx, batch.slice(i, i + 500));
      });
      const smallTotal = scenario.smallTenants * scenario.perSmallTenant;
      await waitFor(
        "every small tenant's command to start and every capped one to end",
        () => {
          const lines = logLines(log);
          const smallStarted = lines.filter(
            ([e, type, key]) => e === 'start' && type === FAIR && key !== 'big',
          );
          const cappedEnded = lines.filter(([e, type]) => e === 'end' && type === CAPPED);
          return smallStarted.length >= smallTotal && cappedEnded.length >= cappedTotal;
        },
        120_000,
      );
      await stopWorkers(children);

      const lines = logLines(log);
      const starts = lines.filter(([event]) => event === 'start');
      // Each command started once (the big backlog only in part).
      expect(new Set(starts.map(([, , , id]) => id)).size).toBe(starts.length);
      expect(starts.filter(([, type, key]) => type === FAIR && key !== 'big')).toHaveLength(smallTotal);
      expect(starts.filter(([, type]) => type === CAPPED)).toHaveLength(cappedTotal);
      // Fair share: the big tenant's starts before the last small tenant's command started.
      const fairStarts = starts.filter(([, type]) => type === FAIR).map(([, , key]) => key);
      const lastSmall = Math.max(...small.map((t) => fairStarts.lastIndexOf(t)));
      const bigBefore = fairStarts.slice(0, lastSmall).filter((key) => key === 'big').length;
      expect(bigBefore).toBeLessThan(scenario.big * 0.05);
      // Per-key concurrency, replayed in append order.
      const running = new Map<string, number>();
      let most = 0;
      for (const [event, type, key] of lines) {
        if (type !== CAPPED || key === undefined) continue;
        const now = (running.get(key) ?? 0) + (event === 'start' ? 1 : -1);
        running.set(key, now);
        most = Math.max(most, now);
      }
      expect(most).toBeLessThanOrEqual(scenario.perCustomer);
      expect([...running.values()].every((n) => n === 0)).toBe(true);
      // Several processes took part.
      expect(new Set(starts.map(([, , , , pid]) => pid)).size).toBeGreaterThan(1);
    }, 240_000);
  });
}
