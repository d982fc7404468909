import { describe, expect, it } from 'vitest';
import { silentLogger, type CommandEvent } from '@asynccmd/core';
import { createAsyncCommands, defineExecutor } from '../../src/index.js';
import { claimedRow, stubStore } from '../stub-store.js';

const lost = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(condition()).toBe(true);
}

describe('surviving a lost database connection', () => {
  it('the poll loop logs once, backs off, and resumes on its own', async () => {
    let failures = 3;
    const store = stubStore({
      reclaimHung: async () => [],
      claimDue: async () => {
        if (failures-- > 0) throw lost();
        return [];
      },
      close: async () => undefined,
    });
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (_o: object, msg?: string) => void warnings.push(msg ?? '') };
    const work = defineExecutor<'t.work', { n: number }>({ type: 't.work', execute: () => undefined });
    const runtime = createAsyncCommands({ store, executors: [work], logger, pollIntervalMs: 10 });
    const events: CommandEvent[] = [];
    runtime.on((e) => events.push(e));
    runtime.start();
    await until(() => events.some((e) => e.kind === 'round'));
    expect(events.filter((e) => e.kind === 'store-error')).toHaveLength(3);
    expect(warnings).toHaveLength(1);
    expect(runtime.state().scheduler.consecutiveFailures).toBe(0);
    expect(runtime.state().failingStoreOperations).toEqual([]);
    await runtime.stop({ timeoutMs: 1000 });
  });

  it('the hung reclaimer runs on its own timer: its outage never stops claiming, and it resumes', async () => {
    let failures = 3;
    let reclaims = 0;
    let claimed = false;
    const store = stubStore({
      reclaimHung: async () => {
        reclaims++;
        if (failures-- > 0) throw lost();
        return [];
      },
      claimDue: async () => (claimed ? [] : ((claimed = true), [claimedRow('1', 't.work')])),
      complete: async (refs) => refs.map((r) => r.id),
      close: async () => undefined,
    });
    const work = defineExecutor<'t.work', { n: number }>({ type: 't.work', execute: () => undefined });
    const runtime = createAsyncCommands({ store, executors: [work], pollIntervalMs: 10 });
    const events: CommandEvent[] = [];
    runtime.on((e) => events.push(e));
    runtime.start();
    // Claiming and running go on while every reclaim fails.
    await until(() => events.some((e) => e.kind === 'succeeded'));
    await until(() => reclaims > 3 && runtime.state().failingStoreOperations.length === 0);
    const errors = events.filter((e) => e.kind === 'store-error');
    expect(errors).toHaveLength(3);
    expect(errors.every((e) => e.kind === 'store-error' && e.operation === 'reclaim')).toBe(true);
    expect(runtime.state().scheduler.consecutiveFailures).toBe(0);
    await runtime.stop({ timeoutMs: 1000 });
  });

  it('a completion that meets a lost connection is retried while the lease is kept alive', async () => {
    let completeFailures = 2;
    const log: string[] = [];
    let claimed = false;
    const store = stubStore({
      reclaimHung: async () => [],
      claimDue: async () => (claimed ? [] : ((claimed = true), [claimedRow('1', 't.pooled')])),
      heartbeat: async (refs) => {
        log.push(`beat ${refs.map((r) => r.id).join(',')}`);
        return [...refs];
      },
      complete: async (refs) => {
        if (completeFailures-- > 0) {
          log.push('complete failed');
          throw lost();
        }
        log.push('complete');
        return refs.map((r) => r.id);
      },
      close: async () => undefined,
    });
    const pooled = defineExecutor<'t.pooled', { n: number }>({
      type: 't.pooled',
      mode: 'ASYNC_POOL',
      leaseMs: 200, // heartbeats every 50 ms
      execute: () => undefined,
    });
    const runtime = createAsyncCommands({ store, executors: [pooled], pollIntervalMs: 10 });
    const events: CommandEvent[] = [];
    runtime.on((e) => events.push(e));
    runtime.start();
    await until(() => events.some((e) => e.kind === 'succeeded'));
    expect(log.filter((l) => l.startsWith('complete'))).toEqual([
      'complete failed',
      'complete failed',
      'complete',
    ]);
    // During the outage the claim kept being heartbeat, so no other instance could take it back.
    const during = log.slice(log.indexOf('complete failed'), log.indexOf('complete'));
    expect(during).toContain('beat 1');
    expect(runtime.state().heldLeases).toBe(0);
    await runtime.stop({ timeoutMs: 1000 });
  });
});
