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

function setup(maxPayloadBytes = 1024, typePriorities?: Readonly<Record<string, number>>) {
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
    ...(typePriorities ? { typePriorities } : {}),
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

describe('client validation: the limits every store holds to', () => {
  const order = { orderId: 'a', version: 1 };

  it('refuses an invalid Date, deep nesting and a throwing getter in a payload with PAYLOAD_NOT_SERIALISABLE', async () => {
    const { client, inserted } = setup(1_000_000);
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 100_000; i++) deep = { deep };
    const hostile = {
      ...order,
      get version(): number {
        throw new Error('no access');
      },
    };
    for (const payload of [{ ...order, at: new Date('nope') }, { ...order, deep }, hostile]) {
      await expect(client.submit({}, 'order.notify', payload as typeof order)).rejects.toThrow(
        code('PAYLOAD_NOT_SERIALISABLE'),
      );
    }
    expect(inserted).toEqual([]);
  });

  it('refuses a Date in a payload, and a payload type holding one does not compile', async () => {
    // @ts-expect-error — a Date would reach the executor as a string
    defineExecutor<'at.date', { at: Date }>({ type: 'at.date', execute: () => undefined });
    // @ts-expect-error — however it is nested, optional or in a union
    defineExecutor<'at.list', { items: { at?: Date | string }[] }>({
      type: 'at.list',
      execute: () => undefined,
    });
    defineExecutor<'at.text', { at: string; note?: string; raw: unknown }>({
      type: 'at.text',
      execute: () => undefined,
    });
    const { client, inserted } = setup();
    const dated = { ...order, at: new Date(0) } as typeof order;
    await expect(client.submit({}, 'order.notify', dated)).rejects.toThrow(
      /\$\.at is a Date, which JSON turns into a string: send at\.toISOString\(\)/,
    );
    expect(inserted).toEqual([]);
  });

  it('refuses oversized headers, NUL in bizKey or owner, and a runAt outside years 1000-9999', async () => {
    const { client, inserted } = setup();
    for (const options of [
      { headers: { ['k'.repeat(100_000)]: 'v' } },
      { headers: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`h${i}`, 'v'])) },
      { bizKey: 'order\u00001' },
      { owner: 'svc\u0000' },
      { runAt: new Date(Date.UTC(-1000, 0, 1)) },
      { runAt: new Date(Date.UTC(10_000, 0, 1)) },
    ]) {
      await expect(
        client.submit({}, 'order.notify', order, options),
        JSON.stringify(options).slice(0, 80),
      ).rejects.toThrow(code('INVALID_ARGUMENT'));
    }
    await expect(client.submitIdempotent({}, 'order.notify', 'k\u0000', order)).rejects.toThrow(
      code('INVALID_ARGUMENT'),
    );
    expect(inserted).toEqual([]);
  });
});

describe('client: priorities and ordering keys', () => {
  const order = { orderId: 'a', version: 1 };

  it('takes the priority of the submit, else the type default of typePriorities, else 0', async () => {
    const { client, inserted } = setup(1024, { 'order.notify': -5 });
    await client.submit({}, 'order.notify', order);
    await client.submit({}, 'order.notify', order, { priority: 7 });
    await client.submit({} as never, 'report.render' as 'order.notify', order);
    await client.submit({}, 'order.notify', order, { orderingKey: 'order-a' });
    expect(inserted.map((batch) => batch[0]?.priority)).toEqual([-5, 7, 0, -5]);
    expect(inserted.map((batch) => batch[0]?.orderingKey ?? null)).toEqual([null, null, null, 'order-a']);
  });

  it('refuses a priority out of range or not an integer, and a bad ordering key, before writing', async () => {
    const { client, inserted } = setup();
    for (const options of [
      { priority: 32768 },
      { priority: -32769 },
      { priority: 0.5 },
      { priority: '1' as unknown as number },
      { orderingKey: '' },
      { orderingKey: 'k'.repeat(129) },
      { orderingKey: 'k\u0000' },
    ]) {
      await expect(
        client.submit({}, 'order.notify', order, options),
        JSON.stringify(options),
      ).rejects.toThrow(code('INVALID_ARGUMENT'));
    }
    expect(inserted).toEqual([]);
  });

  it('refuses typePriorities that are not integers in range when the runtime is built', () => {
    expect(() => setup(1024, { 'order.notify': 1.5 })).toThrow(/typePriorities/);
    expect(() => setup(1024, { 'order.notify': 40_000 })).toThrow(/typePriorities/);
  });
});
