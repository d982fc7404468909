import { describe, expect, it } from 'vitest';
import { AdaptiveQueue } from '../src/adaptive-queue.js';

describe('AdaptiveQueue feeds shared transactions within their window', () => {
  /** A queue of `concurrency` slots that saw 1.5 ms executions and 2 ms claims. */
  function measured(concurrency: number): AdaptiveQueue {
    const queue = new AdaptiveQueue(concurrency);
    queue.claimTook(2);
    for (let i = 0; i < 50; i++) queue.executionTook(1.5);
    return queue;
  }

  it('holds enough for every slot to fill its transaction when the transaction fills within its window', () => {
    const queue = measured(10);
    const alone = queue.size;
    // 32 attempts of 1.5 ms fill in 48 ms: more than the default 20 ms window, so it stays as alone.
    queue.sharedUpTo(32);
    expect(queue.size).toBe(alone);
    // A window of 50 ms (transactionGroupMs) lets them fill: 10 slots × 32 waiting.
    queue.sharedUpTo(32, 50);
    expect(queue.size).toBe(320);
    // Never past the adaptive queue's bound.
    const wide = measured(20);
    wide.sharedUpTo(32, 50);
    expect(wide.size).toBe(500);
  });

  it('a slot that runs only its own command gets the plain adaptive size', () => {
    const queue = measured(10);
    const alone = queue.size;
    queue.sharedUpTo(1, 1000);
    expect(queue.size).toBe(alone);
  });
});
