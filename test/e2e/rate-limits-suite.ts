import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { CommandStore, NewCommand } from '@asynccmd/core';
import type { RuntimeHarness, RuntimeHarnessFactory } from './harness.js';
import { lineOf, spawnWorker, stopWorkers, waitFor } from './worker-processes.js';

const WORKER = fileURLToPath(new URL('./rate-limits-worker.mjs', import.meta.url));
const RATED = 'e2e.rated';
const POLL_INTERVAL_MS = 2_000;
const FREE = 'e2e.free';

export interface RateLimitScenario {
  readonly workers: number;
  /** Commands of the rate-limited type inserted by the test (claimed by the workers' poll loops). */
  readonly inserted: number;
  /** Commands of it each worker submits itself (claimed by id after commit, with a token). */
  readonly submittedPerWorker: number;
  /** Commands of the type without a rate limit, inserted by the test. */
  readonly free: number;
  readonly rate: { readonly maxStarts: number; readonly periodMs: number; readonly burst: number };
}

async function successes(store: CommandStore, type: string): Promise<number> {
  const stats = await store.stats(new Date());
  return stats.counts
    .filter((c) => c.type === type && c.status === 'SUCCESS')
    .reduce((n, c) => n + c.count, 0);
}

/** The most of `starts` (ms) in any window [t, t + periodMs) that begins at one of them. */
function mostInAnyWindow(starts: readonly number[], periodMs: number): number {
  const sorted = [...starts].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (j < sorted.length && (sorted[j] as number) < (sorted[i] as number) + periodMs) j++;
    most = Math.max(most, j - i);
  }
  return most;
}

/**
 * A rate limit end to end: worker processes drain one rate-limited type from one table, polled and
 * claimed by id after their own submits, beside a type without a rate limit. Every execution's start
 * is appended to a file outside the queue table with the time of its claim on the database clock
 * (what the limit governs; a loaded machine's pool queue may delay the executor after it): in no
 * window of the period were more than maxStarts of the rated type claimed, every command ran once,
 * and the other type was not held to the limit. The other checks bound the time from one side only:
 * held to the sustained rate (never faster), and faster than the polls alone could claim them.
 */
export function describeRateLimitE2E<Tx>(
  name: string,
  harnessFactory: RuntimeHarnessFactory<Tx>,
  scenario: RateLimitScenario,
): void {
  describe(`rate limit end to end on ${name}`, () => {
    let harness: RuntimeHarness<Tx> | null = null;
    const children: ChildProcess[] = [];
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-rates-'));
    afterAll(async () => {
      for (const child of children) child.kill('SIGKILL');
      await harness?.dispose();
      rmSync(dir, { recursive: true, force: true });
    });

    const { rate } = scenario;
    const rated = scenario.inserted + scenario.workers * scenario.submittedPerWorker;
    it(`${rated} commands limited to ${rate.maxStarts} starts per ${rate.periodMs} ms (burst ${rate.burst}), run by ${scenario.workers} processes: never more in any window, all run; ${scenario.free} of another type unthrottled`, async () => {
      harness = await harnessFactory(`rate_${process.pid}_${Math.floor(Math.random() * 1e6)}`);
      const store = (await harness.openStore()) as CommandStore<Tx>;
      const log = join(dir, 'executions.log');
      const ready: Promise<void>[] = [];
      const submitted: Promise<void>[] = [];
      for (let w = 0; w < scenario.workers; w++) {
        const child = spawnWorker(
          WORKER,
          {
            store: harness.workerStore,
            rated: RATED,
            free: FREE,
            rate,
            log,
            // Longer than a token's wait: the rated type keeps pace only if tokens wake the loop.
            pollIntervalMs: POLL_INTERVAL_MS,
            concurrency: 8,
            workMs: 5,
            submits: scenario.submittedPerWorker,
          },
          true,
        );
        children.push(child);
        ready.push(lineOf(child, 'ready'));
        submitted.push(lineOf(child, 'submitted'));
      }
      await Promise.all(ready);

      const commands = (type: string, count: number): NewCommand[] =>
        Array.from({ length: count }, (_, i) => ({ type, payloadJson: JSON.stringify({ i }), maxRetry: 3 }));
      await store.transaction((tx) =>
        store.insert(tx, [...commands(RATED, scenario.inserted), ...commands(FREE, scenario.free)]),
      );
      for (const child of children) child.stdin?.write('go\n');
      await Promise.all(submitted);
      await waitFor(
        'every command to succeed',
        async () =>
          (await successes(store, RATED)) === rated && (await successes(store, FREE)) === scenario.free,
        240_000,
      );
      await stopWorkers(children);

      const starts = readFileSync(log, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => l.split(' '))
        .map(([, type, id, pid, at]) => ({ type, id, pid, at: Number(at) }));
      const ratedStarts = starts.filter((s) => s.type === RATED);
      const freeStarts = starts.filter((s) => s.type === FREE);
      // Every command ran, once.
      expect(ratedStarts).toHaveLength(rated);
      expect(new Set(ratedStarts.map((s) => s.id)).size).toBe(rated);
      expect(freeStarts).toHaveLength(scenario.free);
      // The guarantee: no window of the period saw more than maxStarts claims.
      const most = mostInAnyWindow(
        ratedStarts.map((s) => s.at),
        rate.periodMs,
      );
      expect(most).toBeLessThanOrEqual(rate.maxStarts);
      // Held to the sustained rate, (maxStarts − burst) per period after the first burst…
      const perStartMs = rate.periodMs / (rate.maxStarts - rate.burst);
      const times = ratedStarts.map((s) => s.at);
      const spread = Math.max(...times) - Math.min(...times);
      expect(spread).toBeGreaterThanOrEqual((rated - rate.burst - 1) * perStartMs * 0.9);
      // …and woken by tokens: the polls alone (each finding at most a burst's tokens) would have
      // taken this long. Claimed by several processes.
      expect(spread).toBeLessThan(((rated - rate.burst) / rate.burst) * POLL_INTERVAL_MS);
      expect(new Set(ratedStarts.map((s) => s.pid)).size).toBeGreaterThan(1);
      // The type without a rate limit, in the same runtimes, was not held to it.
      expect(
        mostInAnyWindow(
          freeStarts.map((s) => s.at),
          rate.periodMs,
        ),
      ).toBeGreaterThan(rate.maxStarts);
    }, 300_000);
  });
}
