import type { CommandStore, NewCommand } from '@asynccmd/core';
import { createAsyncCommands, defineExecutor, type AsyncCommands } from '@asynccmd/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { RUNTIME_HARNESSES } from './all-harnesses.js';
import type { RuntimeHarness } from './harness.js';

const TYPE = 'e2e.rounds';
const KEYS = 8;
const PER_KEY = 25;
const UNKEYED = 50;

async function waitFor(what: string, condition: () => boolean, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

interface Execution {
  readonly event: 'start' | 'end';
  readonly id: string;
  readonly key: string | null;
}

/**
 * A keyed backlog is drained by the wake-ups of written outcomes: with a poll interval far longer
 * than the test, nothing else could claim a freed key's next command, or the commands without a
 * key that wait beside them.
 */
describe.each(RUNTIME_HARNESSES)(
  'a keyed backlog drains without the poll interval on %s',
  (_name, factory) => {
    let harness: RuntimeHarness | null = null;
    const runtimes: AsyncCommands[] = [];
    let seq = 0;

    afterEach(async () => {
      for (const runtime of runtimes.splice(0))
        await runtime.stop({ timeoutMs: 2_000 }).catch(() => undefined);
      await harness?.dispose();
      harness = null;
    });

    /** KEYS keys with PER_KEY commands each, interleaved, then UNKEYED without a key; ids by key in order. */
    async function backlog(store: CommandStore): Promise<Map<string, string[]>> {
      const rows: NewCommand[] = [];
      for (let i = 0; i < KEYS * PER_KEY; i++) {
        rows.push({ type: TYPE, payloadJson: '{}', maxRetry: 0, orderingKey: `key-${i % KEYS}` });
      }
      for (let i = 0; i < UNKEYED; i++) rows.push({ type: TYPE, payloadJson: '{}', maxRetry: 0 });
      const ids = await store.transaction((tx) => store.insert(tx, rows));
      const byKey = new Map<string, string[]>();
      ids.forEach((id, i) => {
        const key = rows[i]!.orderingKey;
        if (key) byKey.set(key, [...(byKey.get(key) ?? []), id]);
      });
      return byKey;
    }

    async function drain(instances: number): Promise<void> {
      harness = await factory(`ordr_${process.pid}_${++seq}_${Math.floor(Math.random() * 1e6)}`);
      const submitted = await backlog(await harness.openStore());
      const log: Execution[] = [];
      const executor = defineExecutor<typeof TYPE, Record<string, never>>({
        type: TYPE,
        mode: 'ASYNC_POOL',
        execute: async (_payload, ctx) => {
          log.push({ event: 'start', id: ctx.id, key: ctx.command.orderingKey });
          await new Promise((resolve) => setTimeout(resolve, 1));
          log.push({ event: 'end', id: ctx.id, key: ctx.command.orderingKey });
        },
      });
      for (let i = 0; i < instances; i++) {
        const store = await harness.openStore();
        const runtime = createAsyncCommands({
          store,
          executors: [executor],
          sharedPool: { concurrency: 4 },
          pollIntervalMs: 600_000,
          reclaimIntervalMs: 600_000,
        });
        runtimes.push(runtime as unknown as AsyncCommands);
        await runtime.start();
      }
      const total = KEYS * PER_KEY + UNKEYED;
      await waitFor('the backlog to drain', () => log.filter((e) => e.event === 'end').length === total);

      const starts = log.filter((e) => e.event === 'start');
      expect(new Set(starts.map((e) => e.id)).size).toBe(total);
      const running = new Map<string, string>();
      const order = new Map<string, string[]>();
      for (const e of log) {
        if (e.key === null) continue;
        if (e.event === 'start') {
          expect(
            running.get(e.key),
            `${e.key}: ${e.id} started while another of the key ran`,
          ).toBeUndefined();
          running.set(e.key, e.id);
          order.set(e.key, [...(order.get(e.key) ?? []), e.id]);
        } else running.delete(e.key);
      }
      expect(new Map([...order].sort())).toEqual(new Map([...submitted].sort()));
    }

    it('by one instance', async () => {
      await drain(1);
    }, 180_000);

    it('by two instances on one table', async () => {
      await drain(2);
    }, 180_000);
  },
);
