import { describe, expect, it } from 'vitest';
import type { NewCommand } from '@asynccmd/core';
import { createAsyncCommands, defineExecutor } from '../src/index.js';
import { stubStore } from './stub-store.js';

const notify = defineExecutor<'order.notify', { orderId: string; version: number }>({
  type: 'order.notify',
  mode: 'IMMEDIATE',
  maxRetry: 2,
  execute: () => undefined,
});

function setup(maxPayloadBytes = 1024) {
  const inserted: NewCommand[][] = [];
  const store = stubStore({
    insert: async (_tx, commands) => {
      inserted.push([...commands]);
      return commands.map((_, i) => String(i + 1));
    },
  });
  const runtime = createAsyncCommands({
    store,
    executors: [notify],
    submitOnlyTypes: ['report.render'],
    maxPayloadBytes,
    owner: 'orders',
    headersProvider: () => ({ traceparent: '00-abc-def-01' }),
  });
  return { client: runtime.client, inserted };
}

const code = (c: string) => expect.objectContaining({ code: c });

describe('client validation (before anything is written)', () => {
  it('refuses an unknown type, naming the known ones', async () => {
    const { client, inserted } = setup();
    // @ts-expect-error — not a type of this runtime
    await expect(client.submit({}, 'order.nope', {})).rejects.toThrow(code('UNKNOWN_COMMAND_TYPE'));
    await expect(
      client.submit({}, 'order.nope' as 'order.notify', { orderId: 'o', version: 1 }),
    ).rejects.toThrow(/order\.notify/);
    expect(inserted).toEqual([]);
  });

  it('refuses payloads that are not JSON-serialisable or too large', async () => {
    const { client, inserted } = setup(64);
    const bad = { orderId: 'o', version: 1n } as unknown as { orderId: string; version: number };
    await expect(client.submit({}, 'order.notify', bad)).rejects.toThrow(code('PAYLOAD_NOT_SERIALISABLE'));
    const big = { orderId: 'x'.repeat(100), version: 1 };
    await expect(client.submit({}, 'order.notify', big)).rejects.toThrow(code('PAYLOAD_TOO_LARGE'));
    expect(inserted).toEqual([]);
  });

  it('validates a whole batch before writing any of it', async () => {
    const { client, inserted } = setup();
    const items = [
      { type: 'order.notify' as const, payload: { orderId: 'a', version: 1 } },
      { type: 'order.notify' as const, payload: { orderId: 'b', version: Number.NaN } },
    ];
    await expect(client.submitMany({}, items)).rejects.toThrow(code('PAYLOAD_NOT_SERIALISABLE'));
    await expect(
      client.submitIdempotent({}, 'order.notify', '', { orderId: 'a', version: 1 }),
    ).rejects.toThrow(code('INVALID_ARGUMENT'));
    await expect(
      client.submit({}, 'order.notify', { orderId: 'a', version: 1 }, { runAt: new Date('nope') }),
    ).rejects.toThrow(code('INVALID_ARGUMENT'));
    expect(inserted).toEqual([]);
  });

  it('fills defaults: executor maxRetry, owner, provider headers; accepts submit-only types', async () => {
    const { client, inserted } = setup();
    await client.submit({}, 'order.notify', { orderId: 'a', version: 3 }, { bizKey: 'order-a' });
    await client.submit({} as never, 'report.render' as 'order.notify', { orderId: 'r', version: 1 });
    expect(inserted[0]?.[0]).toMatchObject({
      type: 'order.notify',
      payloadJson: '{"orderId":"a","version":3}',
      bizKey: 'order-a',
      maxRetry: 2,
      owner: 'orders',
      headers: { traceparent: '00-abc-def-01' },
    });
    expect(inserted[1]?.[0]).toMatchObject({ type: 'report.render', maxRetry: 5 });
  });
});
