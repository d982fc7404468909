import { describe, expect, it } from 'vitest';
import { silentLogger, type CommandEvent } from '@asynccmd/core';
import { CommandEvents } from '../src/command-events.js';
import { createAsyncCommands, defineExecutor } from '../src/index.js';
import { claimedRow, stubStore } from './stub-store.js';

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(condition()).toBe(true);
}

describe('ExecutionContext', () => {
  it('delivers the timeout through ctx.signal, also in a spread copy, and records the failure', async () => {
    let claimed = false;
    const failed: string[] = [];
    const store = stubStore({
      reclaimHung: async () => [],
      claimDue: async () => (claimed ? [] : ((claimed = true), [claimedRow('1', 't.slow')])),
      heartbeat: async (refs) => [...refs],
      fail: async (attempts) =>
        attempts.map(({ ref, outcome }) => (failed.push(`${ref.id}:${outcome.lastError}`), ref.id)),
      close: async () => undefined,
    });
    let reason: unknown = null;
    const slow = defineExecutor<'t.slow', Record<string, never>>({
      type: 't.slow',
      mode: 'ASYNC_POOL',
      timeoutMs: 20,
      execute: (_p, ctx) => {
        const copy = { ...ctx, extra: true };
        expect(copy.attempt).toBe(1);
        return new Promise<void>((_resolve, reject) => {
          copy.signal.addEventListener('abort', () => {
            reason = copy.signal.reason;
            reject(copy.signal.reason as Error);
          });
        });
      },
    });
    const runtime = createAsyncCommands({ store, executors: [slow], pollIntervalMs: 10 });
    const events: CommandEvent[] = [];
    runtime.on((e) => events.push(e));
    runtime.start();
    await until(() => events.some((e) => e.kind === 'retried'));
    expect(reason).toMatchObject({ name: 'TimeoutError' });
    expect(failed).toEqual([expect.stringMatching(/^1:.*timed out after 20 ms/)]);
    await runtime.stop({ timeoutMs: 100 });
  });
});

describe('CommandEvents', () => {
  it('says whether anyone listens, so hot paths can skip building events', () => {
    const events = new CommandEvents(silentLogger);
    expect(events.listening).toBe(false);
    const seen: string[] = [];
    const off = events.on((e) => seen.push(e.kind));
    expect(events.listening).toBe(true);
    events.emit({ kind: 'released', id: '1', type: 't' });
    off();
    expect(events.listening).toBe(false);
    events.emit({ kind: 'released', id: '2', type: 't' });
    expect(seen).toEqual(['released']);
  });
});
