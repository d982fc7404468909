import { describe, expect, it } from 'vitest';
import type { ClaimRef, CommandStore, WakeupChannel } from '@asynccmd/core';
import { createAsyncCommands, defineExecutor, type PoolOptions } from '../src/index.js';
import { claimedRow, stubStore } from './stub-store.js';

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(condition()).toBe(true);
}

interface Row {
  readonly id: string;
  readonly key: string | null;
  state: 'pending' | 'running' | 'done';
}

/**
 * A runtime over a stub store that keeps ordering keys as the adapters do: a claim walks the rows
 * in id order and takes a keyed one only when no earlier one of its key is pending or running.
 * `rows[i]` has key `keys[i]` (null: none). Every command takes one event-loop turn, unless it is
 * the first `gated` command claimed, which runs until `openGate()`.
 */
function keyedRuntime(keys: readonly (string | null)[], pool: PoolOptions, gated = false) {
  const rows: Row[] = keys.map((key, i) => ({ id: String(i + 1), key, state: 'pending' }));
  const limits: number[] = [];
  let notifies = 0;
  const wakeups: WakeupChannel = {
    subscribe: async () => async () => undefined,
    notify: () => void notifies++,
  };
  const store: CommandStore = stubStore({
    wakeups,
    reclaimHung: async () => [],
    claimDue: async ({ limit }) => {
      limits.push(limit);
      const taken: Row[] = [];
      for (const row of rows) {
        if (taken.length === limit) break;
        if (row.state !== 'pending') continue;
        const held = rows.some(
          (r) => row.key !== null && r.key === row.key && Number(r.id) < Number(row.id) && r.state !== 'done',
        );
        if (held) continue;
        row.state = 'running';
        taken.push(row);
      }
      return taken.map((r) => claimedRow(r.id, 't.keyed', { orderingKey: r.key }));
    },
    heartbeat: async (refs) => [...refs],
    complete: async (refs: readonly ClaimRef[]) => {
      for (const ref of refs) rows[Number(ref.id) - 1]!.state = 'done';
      return refs.map((r) => r.id);
    },
    release: async (refs) => refs.map((r) => r.id),
    close: async () => undefined,
  });
  const log: { event: 'start' | 'end'; id: string; key: string | null }[] = [];
  let gate: (() => void) | null = null;
  let gateUsed = !gated;
  const keyed = defineExecutor<'t.keyed', Record<string, never>>({
    type: 't.keyed',
    mode: 'ASYNC_POOL',
    execute: async (_payload, ctx) => {
      const key = ctx.command.orderingKey;
      log.push({ event: 'start', id: ctx.id, key });
      if (!gateUsed) {
        gateUsed = true;
        await new Promise<void>((resolve) => (gate = resolve));
      } else await new Promise((resolve) => setImmediate(resolve));
      log.push({ event: 'end', id: ctx.id, key });
    },
  });
  // A poll interval far longer than the test: every round here is the start or a wake-up.
  const runtime = createAsyncCommands({
    store,
    executors: [keyed],
    sharedPool: pool,
    pollIntervalMs: 600_000,
  });
  const done = () => rows.filter((r) => r.state === 'done').length;
  return { runtime, rows, limits, log, done, notifies: () => notifies, openGate: () => gate?.() };
}

/** Each key's commands ran one at a time, in id order. */
function expectSerialPerKey(log: readonly { event: string; id: string; key: string | null }[]): void {
  const running = new Map<string, string>();
  const last = new Map<string, number>();
  for (const e of log) {
    if (e.key === null) continue;
    if (e.event === 'start') {
      expect(running.get(e.key), `${e.key}: ${e.id} started while another of the key ran`).toBeUndefined();
      expect(Number(e.id)).toBeGreaterThan(last.get(e.key) ?? 0);
      running.set(e.key, e.id);
      last.set(e.key, Number(e.id));
    } else running.delete(e.key);
  }
}

describe('Scheduler rounds with ordering keys', () => {
  it('drains a keyed backlog on the wake-ups of written outcomes, asking for one command per freed key', async () => {
    // 3 keys, 10 commands each, interleaved: a claim finds at most 3 claimable at any time.
    const keys = Array.from({ length: 30 }, (_, i) => `k${i % 3}`);
    const t = keyedRuntime(keys, { concurrency: 10, queueSize: 0 });
    t.runtime.start();
    await until(() => t.done() === 30);
    await t.runtime.stop({ timeoutMs: 1_000 });
    expectSerialPerKey(t.log);
    // The first round asks for the pool's room; every later one for no more than the freed keys.
    expect(t.limits[0]).toBe(10);
    expect(t.limits.length).toBeGreaterThanOrEqual(10);
    for (const limit of t.limits.slice(1)) expect(limit).toBeLessThanOrEqual(3);
    // This instance had room for all it freed: no other instance was sent to look.
    expect(t.notifies()).toBe(0);
  });

  it('still claims commands without a key at the room of the pool, beside a keyed backlog', async () => {
    // Two keys with 5 commands each, then 20 commands without a key.
    const keys = [...Array.from({ length: 10 }, (_, i) => `k${i % 2}`), ...Array<null>(20).fill(null)];
    const t = keyedRuntime(keys, { concurrency: 4, queueSize: 0 });
    t.runtime.start();
    await until(() => t.done() === 30);
    await t.runtime.stop({ timeoutMs: 1_000 });
    expectSerialPerKey(t.log);
  });

  it('wakes the other instances when a round woken by a freed key had no room to spare', async () => {
    // Command 1 (no key) holds one of the two slots; 2–4 share a key. Each freed key finds one
    // free slot for its successor: whether more was claimable this instance cannot tell.
    const t = keyedRuntime([null, 'k', 'k', 'k'], { concurrency: 2, queueSize: 0 }, true);
    t.runtime.start();
    await until(() => t.done() === 3);
    expect(t.notifies()).toBeGreaterThan(0);
    t.openGate();
    await until(() => t.done() === 4);
    await t.runtime.stop({ timeoutMs: 1_000 });
    expectSerialPerKey(t.log);
  });
});
