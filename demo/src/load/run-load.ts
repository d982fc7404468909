import type { ProgressBar } from './progress.js';
import { driveLoad, type SentRequest } from './driver.js';
import { requestMix } from './request-mix.js';
import { OperationTracker, type ReadOperations } from './tracker.js';

export interface LoadRun {
  readonly sent: SentRequest[];
  readonly tracker: OperationTracker;
  /** ms from the first request to the last answer. */
  readonly sendingMs: number;
  /** ms from the first request until every accepted operation was terminal (or the wait gave up). */
  readonly settledMs: number;
  readonly allTerminal: boolean;
}

export interface LoadRunOptions {
  readonly baseUrl: string;
  readonly read: ReadOperations;
  readonly orders: number;
  readonly concurrency: number;
  /** Open loop at this many orders per second instead of `concurrency` closed-loop clients. */
  readonly ratePerSec?: number;
  readonly seed: number;
  readonly runId: string;
  /** Give up waiting for terminal states after this long. */
  readonly settleTimeoutMs?: number;
  readonly progress?: ProgressBar | null;
  readonly label?: string;
}

/** Sends the request mix through HTTP, then follows every accepted operation to a terminal state. */
export async function runLoad(options: LoadRunOptions): Promise<LoadRun> {
  const requests = requestMix(options.orders, options.seed, options.runId);
  const tracker = new OperationTracker(options.read);
  const bar = options.progress ?? null;
  const label = options.label ?? 'orders ';
  let accepted = 0;
  let refused = 0;
  const started = performance.now();
  tracker.start();
  const sent = await driveLoad({
    baseUrl: options.baseUrl,
    requests,
    concurrency: options.concurrency,
    ratePerSec: options.ratePerSec,
    onAnswer: (s, done) => {
      if (s.operationId) {
        accepted++;
        tracker.add(s.operationId);
      } else refused++;
      bar?.update(
        label,
        done,
        requests.length,
        `accepted ${accepted} · refused ${refused} · settled ${accepted - tracker.unfinished().length}`,
      );
    },
  });
  const sendingMs = performance.now() - started;
  bar?.done();
  const allTerminal = await tracker.waitAll(options.settleTimeoutMs ?? 60_000, () => {
    const settled = accepted - tracker.unfinished().length;
    const dead = [...tracker.operations.values()].filter((o) => o.state === 'follow_up_failed').length;
    bar?.update('settling', settled, accepted, `terminal ${settled}/${accepted} · dead letters ${dead}`);
  });
  tracker.stop();
  bar?.done();
  return { sent, tracker, sendingMs, settledMs: performance.now() - started, allTerminal };
}
