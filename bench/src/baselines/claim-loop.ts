import type { BenchPayload } from '../protocol.js';

/** One claimed batch of the raw-SQL baseline: its payloads, and the statement that completes it. */
export interface ClaimedBatch {
  readonly payloads: readonly BenchPayload[];
  complete(): Promise<void>;
}

/**
 * The raw-SQL baseline loop: claim a batch, run each (no-op) executor, complete the batch in one
 * statement, let the event loop turn; repeat until stopped, sleeping `pollMs` when nothing is due.
 */
export async function claimLoop(
  claimBatch: () => Promise<ClaimedBatch | null>,
  onExecute: (payload: BenchPayload) => void,
  stopped: () => boolean,
  pollMs = 50,
): Promise<void> {
  while (!stopped()) {
    const batch = await claimBatch();
    if (batch === null) {
      await new Promise((r) => setTimeout(r, pollMs));
      continue;
    }
    for (const payload of batch.payloads) onExecute(payload);
    await batch.complete();
    // A synchronous driver (SQLite) would otherwise loop in microtasks alone, and the process's
    // timers (its progress reports) would not run until the drain is over: one turn per batch.
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * The lean bare loop's shape: claim a batch, run it, then complete it while the next claim is
 * already on its way (two connections), so the database always has the next batch in hand.
 */
export async function overlappingClaimLoop(
  claimBatch: () => Promise<ClaimedBatch | null>,
  onExecute: (payload: BenchPayload) => void,
  stopped: () => boolean,
  pollMs = 50,
): Promise<void> {
  let batch: ClaimedBatch | null = null;
  while (!stopped()) {
    if (batch === null) {
      batch = await claimBatch();
      if (batch === null) {
        await new Promise((r) => setTimeout(r, pollMs));
        continue;
      }
    }
    for (const payload of batch.payloads) onExecute(payload);
    [, batch] = await Promise.all([batch.complete(), claimBatch()]);
  }
  // A batch claimed as the loop stopped (a drain cut at its time cap) stays RUNNING, never run.
}
