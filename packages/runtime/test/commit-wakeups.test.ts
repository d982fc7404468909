import { describe, expect, it } from 'vitest';
import type { StoreCapabilities, WakeupChannel } from '@asynccmd/core';
import { createAsyncCommands, defineExecutor } from '../src/index.js';
import { claimedRow, stubStore } from './stub-store.js';

const pooled = defineExecutor<'mail.send', { to: string }>({
  type: 'mail.send',
  execute: () => undefined,
});
const immediate = defineExecutor<'stock.reserve', { sku: string }>({
  type: 'stock.reserve',
  mode: 'IMMEDIATE',
  execute: () => undefined,
});

/** A runtime (not started) on a stub store whose wake-up channel records what it was asked. */
function setup(withCommitHook: boolean) {
  const calls: string[] = [];
  const TX = { tx: 'store transaction' };
  const wakeups: WakeupChannel = {
    subscribe: () => Promise.resolve(() => Promise.resolve()),
    notify: () => void calls.push('notify'),
  };
  const capabilities: StoreCapabilities = {
    skipLocked: false,
    sqlExecutor: false,
    wakeups: true,
    revocations: false,
    commitRiding: withCommitHook
      ? {
          notify: (tx) => {
            calls.push(tx === TX ? 'notifyOnCommit(tx)' : 'notifyOnCommit(other)');
            return true;
          },
          claimById: () => null,
        }
      : null,
  };
  let next = 0;
  const store = stubStore({
    wakeups,
    capabilities,
    insert: (_tx, commands) => Promise.resolve(commands.map(() => String(++next))),
    transaction: async (fn) => {
      const result = await fn(TX);
      calls.push('COMMIT');
      return result;
    },
  });
  const runtime = createAsyncCommands({ store, executors: [pooled, immediate] });
  return { client: runtime.client, calls };
}

describe('cross-process wake-ups of client.transaction', () => {
  it('asks the store to announce with the COMMIT, and then sends no NOTIFY of its own', async () => {
    const { client, calls } = setup(true);
    await client.transaction(async (_tx, submit) => {
      await submit('mail.send', { to: 'a@example.com' });
      await submit('mail.send', { to: 'b@example.com' });
    });
    expect(calls).toEqual(['notifyOnCommit(tx)', 'COMMIT']);
  });

  it('notifies after commit when the store cannot announce with the COMMIT', async () => {
    const { client, calls } = setup(false);
    await client.transaction((_tx, submit) => submit('mail.send', { to: 'a@example.com' }));
    expect(calls).toEqual(['COMMIT', 'notify']);
  });

  it('announces nothing for IMMEDIATE-only transactions (claimed by id; the runtime is not running here, so the poll loops are woken after commit instead)', async () => {
    const { client, calls } = setup(true);
    await client.transaction((_tx, submit) => submit('stock.reserve', { sku: 'x' }));
    expect(calls).toEqual(['COMMIT', 'notify']);
  });

  it('announces once for a nested client.transaction, at the outer commit', async () => {
    const { client, calls } = setup(true);
    await client.transaction(async (_tx, submit) => {
      await submit('mail.send', { to: 'a@example.com' });
      await client.transaction((_inner, innerSubmit) => innerSubmit('mail.send', { to: 'b@example.com' }));
    });
    expect(calls.filter((c) => c.startsWith('notifyOnCommit'))).toEqual(['notifyOnCommit(tx)']);
    expect(calls).not.toContain('notify');
  });

  it('leaves transactions the application manages itself to afterCommit, which notifies', async () => {
    const { client, calls } = setup(true);
    const id = await client.submit({ own: 'transaction' }, 'mail.send', { to: 'a@example.com' });
    await client.afterCommit([id]);
    expect(calls).toEqual(['notify']);
  });
});

describe('replacing idempotent submits in client.transaction', () => {
  /** A stub whose idempotent insert answers `result`, recording the options it was given. */
  function idempotentSetup(result: { duplicate: boolean; replaced: boolean }) {
    const calls: string[] = [];
    const store = stubStore({
      capabilities: {
        skipLocked: false,
        sqlExecutor: false,
        wakeups: true,
        revocations: false,
        commitRiding: null,
      },
      wakeups: {
        subscribe: () => Promise.resolve(() => Promise.resolve()),
        notify: () => void calls.push('notify'),
      },
      insertIdempotent: (_tx, _command, options) => {
        calls.push(`insertIdempotent(${options?.onPending ?? 'no options'})`);
        return Promise.resolve({ id: '7', ...result });
      },
      transaction: async (fn) => {
        const value = await fn({});
        calls.push('COMMIT');
        return value;
      },
    });
    const runtime = createAsyncCommands({ store, executors: [pooled] });
    return { client: runtime.client, calls };
  }

  it('announces a replaced command at commit like a new one: it may be due sooner now', async () => {
    const { client, calls } = idempotentSetup({ duplicate: true, replaced: true });
    const result = await client.transaction((tx) =>
      client.submitIdempotent(tx, 'mail.send', 'k', { to: 'a@example.com' }, { onPending: 'replace' }),
    );
    expect(result).toEqual({ id: '7', duplicate: true, replaced: true });
    expect(calls).toEqual(['insertIdempotent(replace)', 'COMMIT', 'notify']);
  });

  it("announces nothing for a duplicate left as it is, and passes no options for 'keep'", async () => {
    const { client, calls } = idempotentSetup({ duplicate: true, replaced: false });
    await client.transaction((tx) =>
      client.submitIdempotent(tx, 'mail.send', 'k', { to: 'a@example.com' }, { onPending: 'keep' }),
    );
    expect(calls).toEqual(['insertIdempotent(no options)', 'COMMIT']);
  });

  it('refuses an unknown onPending with an InvalidArgumentError before the store is asked', async () => {
    const { client, calls } = idempotentSetup({ duplicate: false, replaced: false });
    await expect(
      client.submitIdempotent({}, 'mail.send', 'k', { to: 'a' }, { onPending: 'merge' as 'replace' }),
    ).rejects.toMatchObject({ name: 'InvalidArgumentError', code: 'INVALID_ARGUMENT' });
    expect(calls).toEqual([]);
  });
});

describe('IMMEDIATE claims that ride on the commit', () => {
  it('lets the store claim the first IMMEDIATE command with the COMMIT, and runs what it returns', async () => {
    const calls: string[] = [];
    const ran: string[] = [];
    const TX = { tx: 'store transaction' };
    let next = 0;
    const store = stubStore({
      insert: (_tx, commands) => Promise.resolve(commands.map(() => String(++next))),
      transaction: async (fn) => {
        const result = await fn(TX);
        calls.push('COMMIT');
        return result;
      },
      capabilities: {
        skipLocked: false,
        sqlExecutor: false,
        wakeups: false,
        revocations: false,
        commitRiding: {
          claimById: (tx, p) => {
            calls.push(`claimByIdOnCommit(${tx === TX ? 'tx' : 'other'}, ${p.id}, ${p.types?.join()})`);
            return Promise.resolve(claimedRow(p.id, 'stock.reserve', { payload: { sku: 'x' } }));
          },
          notify: () => false,
        },
      },
      claimById: (p) => {
        calls.push(`claimById(${p.id})`);
        return Promise.resolve(claimedRow(p.id, 'stock.reserve', { payload: { sku: 'y' } }));
      },
      claimDue: () => Promise.resolve([]),
      reclaimHung: () => Promise.resolve([]),
      heartbeat: (refs) => Promise.resolve([...refs]),
      complete: (refs) => Promise.resolve(refs.map((r) => r.id)),
      release: (refs) => Promise.resolve(refs.map((r) => r.id)),
      close: () => Promise.resolve(),
    });
    const reserve = defineExecutor<'stock.reserve', { sku: string }>({
      type: 'stock.reserve',
      mode: 'IMMEDIATE',
      execute: (p) => void ran.push(p.sku),
    });
    const runtime = createAsyncCommands({ store, executors: [reserve], pollIntervalMs: 600_000 });
    runtime.start();
    try {
      await runtime.client.transaction(async (_tx, submit) => {
        await submit('stock.reserve', { sku: 'x' });
        await submit('stock.reserve', { sku: 'y' });
      });
      // The first rode on the commit; the second was claimed by id after it.
      expect(calls).toEqual(['claimByIdOnCommit(tx, 1, stock.reserve)', 'COMMIT', 'claimById(2)']);
      for (let i = 0; i < 100 && ran.length < 2; i++) await new Promise((r) => setTimeout(r, 5));
      expect(ran).toEqual(['x', 'y']);
    } finally {
      await runtime.stop();
    }
  });
});
