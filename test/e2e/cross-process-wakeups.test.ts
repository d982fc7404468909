import type { CommandEvent } from '@asynccmd/core';
import { createAsyncCommands, defineExecutor } from '@asynccmd/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { RUNTIME_HARNESSES } from './all-harnesses.js';
import type { RuntimeHarness } from './harness.js';

async function waitFor(what: string, condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

describe.each(RUNTIME_HARNESSES)('wake-ups between instances on %s', (_name, factory) => {
  let harness: RuntimeHarness | null = null;
  const stops: (() => Promise<void>)[] = [];

  afterEach(async () => {
    for (const stop of stops.splice(0)) await stop().catch(() => undefined);
    await harness?.dispose();
    harness = null;
  });

  /**
   * A fresh harness and a started consumer of `type` that polls once a minute: only a wake-up can
   * start its commands within the test. Returns the `n` of each command it started.
   */
  async function consumerOf(type: string): Promise<number[]> {
    harness = await factory(`xpw_${process.pid}_${Math.floor(Math.random() * 1e6)}`);
    const started: number[] = [];
    const job = defineExecutor<string, { n: number }>({
      type,
      mode: 'ASYNC_POOL',
      execute: async ({ n }) => void started.push(n),
    });
    const consumer = createAsyncCommands({
      store: await harness.openStore(),
      executors: [job],
      pollIntervalMs: 60_000,
    });
    const events: CommandEvent[] = [];
    consumer.on((e) => events.push(e));
    stops.push(() => consumer.stop({ timeoutMs: 2_000 }));
    consumer.start();
    await waitFor('the first poll round', () => events.some((e) => e.kind === 'round'), 10_000);
    return started;
  }

  it('a command submitted over another connection starts long before the next poll', async () => {
    const started = await consumerOf('xpw.job');
    // Another instance on its own connection, which only submits.
    const producer = createAsyncCommands({
      store: await harness!.openStore(),
      executors: [],
      submitOnlyTypes: ['xpw.job'],
    });
    stops.push(() => producer.stop({ timeoutMs: 2_000 }));
    for (const [n, quietMs] of [
      [1, 0],
      [2, 50],
      [3, 1_500], // after a quiet spell: the probe has backed off, and still wakes the consumer
    ] as const) {
      await new Promise((r) => setTimeout(r, quietMs));
      await producer.client.transaction((tx) =>
        producer.client.submit(tx, 'xpw.job' as never, { n } as never),
      );
      const committedAt = Date.now();
      await waitFor(`command ${n} to start`, () => started.includes(n), 10_000);
      // Far below the poll interval: generous, this is about the wake-up, not its speed.
      expect(Date.now() - committedAt).toBeLessThan(5_000);
    }
    expect(started).toEqual([1, 2, 3]);
  }, 60_000);

  it('the last commands of a producer that submits a burst and stops at once start long before the next poll', async () => {
    const started = await consumerOf('xpw.burst');
    for (let round = 0; round < 5; round++) {
      const producer = createAsyncCommands({
        store: await harness!.openStore(),
        executors: [],
        submitOnlyTypes: ['xpw.burst'],
      });
      // Back to back: each commit but the first comes while the wake-up of the one before may
      // still be folding announcements (PostgreSQL's NOTIFY window); then the store closes.
      const ns = Array.from({ length: 10 }, (_, i) => round * 10 + i + 1);
      for (const n of ns) {
        await producer.client.transaction((tx) =>
          producer.client.submit(tx, 'xpw.burst' as never, { n } as never),
        );
      }
      await producer.stop({ timeoutMs: 2_000 });
      // Far below the poll interval: this is about the wake-up, not its speed.
      await waitFor(
        `commands ${ns[0]}–${ns.at(-1)} to start`,
        () => ns.every((n) => started.includes(n)),
        10_000,
      );
    }
    expect(started.sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
  }, 60_000);
});
