import { sleep, startAll, stopAll, type Child } from './fleet.js';
import type { ConsumerSpec } from './protocol.js';
import { rate } from './stats.js';

/** One system set up for a drain run: how to seed it, run it, and check it afterwards. */
export interface DrainTarget {
  readonly system: string;
  /** Drops and recreates the system's tables, then seeds `total` PENDING commands seq 1..total. */
  prepare(total: number): Promise<void>;
  consumer(concurrency: number): ConsumerSpec;
  /** True once the database shows nothing left to run. */
  drained(): Promise<boolean>;
  /** Checks the executions against the database; returns what was checked, throws what failed. */
  verify(total: number, executedSeqs: readonly number[]): Promise<string>;
}

export interface DrainResult {
  readonly rate: number;
  readonly elapsedMs: number;
  readonly check: string;
  /** Per-process notes of the consumers (e.g. rows claimed per round), for reading the figure. */
  readonly diagnostics: string[];
}

/**
 * Seeds the queue, starts `processes` consumer children and waits until they are connected, then
 * times from "go" until the executions reach `total` and the database confirms the drain.
 */
export async function runDrain(
  target: DrainTarget,
  total: number,
  processes: number,
  concurrency: number,
  timeoutMs: number,
): Promise<DrainResult> {
  await target.prepare(total);
  const children = await startAll(
    'consumer',
    Array.from({ length: processes }, () => target.consumer(concurrency)),
  );
  try {
    const t0 = performance.now();
    for (const c of children) c.send({ type: 'go' });
    const deadline = t0 + timeoutMs;
    while (sum(children) < total) {
      failFast(children);
      if (performance.now() > deadline)
        throw new Error(`drain timed out: ${sum(children)}/${total} executed`);
      await sleep(5);
    }
    while (!(await target.drained())) {
      failFast(children);
      if (performance.now() > deadline)
        throw new Error('drain timed out waiting for the database to show it');
      await sleep(5);
    }
    const elapsedMs = performance.now() - t0;
    await stopAll(children);
    failFast(children);
    const seqs = children.flatMap((c) => c.received('executions').flatMap((e) => e.seqs));
    const check = await target.verify(total, seqs);
    const diagnostics = children.flatMap((c) => c.received('executions').flatMap((e) => e.diagnostics ?? []));
    return { rate: rate(total, elapsedMs), elapsedMs, check, diagnostics };
  } finally {
    for (const c of children) c.kill();
  }
}

function sum(children: readonly Child[]): number {
  return children.reduce((n, c) => n + c.executed, 0);
}

function failFast(children: readonly Child[]): void {
  const errors = children.flatMap((c) => c.errors);
  if (errors.length > 0) throw new Error(errors.join('; '));
}
