import { exponentialBackoff, type CommandId, type CommandStore } from '@asynccmd/core';
import { setTimeout as sleep } from 'node:timers/promises';
import { createAsyncCommands, defineExecutor } from '../../../src/index.js';
import { claim, submit } from '../support.js';

/**
 * A table like the order demo's after its load, made by the real runtime: four order command
 * types run by executors that take a few milliseconds and fail now and then (retried), and an ERP
 * that refuses a few orders for good (dead letters). What is left afterwards: delayed and due
 * pending commands nobody here runs, one RUNNING claim, one cancelled command.
 */

export const ORDER_TYPES = [
  'order.confirm-inventory',
  'order.notify-user',
  'order.sync-external',
  'order.update-projection',
] as const;

/** A type no runtime of the tests executes: its due commands wait, so the backlog has an age. */
export const UNRUN_TYPE = 'report.render';

export interface OrderPayload {
  readonly orderId: number;
  readonly version: number;
  /** The ERP refuses this order while `erp.refusing` is set. */
  readonly unmapped?: boolean;
}

/** While true, the ERP refuses unmapped orders; a test that fixes the mapping sets it false. */
export const erp = { refusing: true };

/**
 * The order demo's four executors, against simulated downstreams that take a few milliseconds and
 * fail every so many calls (unless `flaky` is false: then only the ERP's refusals fail).
 */
export function orderRuntime(store: CommandStore, flaky = true) {
  let calls = 0;
  const work = async (failEvery: number, what: string) => {
    calls += 1;
    await sleep(2 + ((calls * 7) % 30));
    if (flaky && failEvery > 0 && calls % failEvery === 0) {
      throw new Error(`${what}: answered 503 (simulated failure)`);
    }
  };
  const common = { maxRetry: 2, backoff: exponentialBackoff({ baseMs: 20, capMs: 80, jitter: 0 }) };
  return createAsyncCommands({
    store,
    owner: 'order-demo',
    pollIntervalMs: 20,
    executors: [
      defineExecutor<(typeof ORDER_TYPES)[0], OrderPayload>({
        ...common,
        type: 'order.confirm-inventory',
        mode: 'IMMEDIATE',
        execute: () => work(19, 'inventory'),
      }),
      defineExecutor<(typeof ORDER_TYPES)[1], OrderPayload>({
        ...common,
        type: 'order.notify-user',
        mode: 'IMMEDIATE',
        execute: () => work(7, 'notification'),
      }),
      defineExecutor<(typeof ORDER_TYPES)[2], OrderPayload>({
        ...common,
        type: 'order.sync-external',
        mode: 'ASYNC_POOL',
        async execute(p) {
          if (p.unmapped && erp.refusing) {
            await sleep(5);
            throw new Error(`external: answered 422 — no article mapping for order ${p.orderId}`);
          }
          await work(5, 'external');
        },
      }),
      defineExecutor<(typeof ORDER_TYPES)[3], OrderPayload>({
        ...common,
        type: 'order.update-projection',
        execute: () => work(0, 'projection'),
      }),
    ],
  });
}

export interface DemoData {
  /** The dead letters the ERP made. */
  readonly dead: readonly CommandId[];
  /** A RUNNING command claimed by another owner, with a lease. */
  readonly running: CommandId;
  /** Due PENDING commands of a type nobody runs here. */
  readonly due: readonly CommandId[];
  /** PENDING commands due in an hour. */
  readonly delayed: readonly CommandId[];
}

/** Fills the store and returns once every order command has reached SUCCESS or DEAD. */
export async function seedDemoData(store: CommandStore, orders = 24): Promise<DemoData> {
  const runtime = orderRuntime(store);
  runtime.start();
  try {
    // In waves, so the charts have more than one bar.
    for (let wave = 0; wave < 3; wave++) {
      for (let i = 0; i < orders / 3; i++) {
        const orderId = 1000 + wave * 100 + i;
        await runtime.client.transaction(async (_tx, submitInTx) => {
          for (const type of ORDER_TYPES) {
            await submitInTx(
              type,
              {
                orderId,
                version: 1,
                ...(i % 5 === 2 && type === 'order.sync-external' ? { unmapped: true } : {}),
              },
              {
                bizKey: `order-${orderId}`,
                headers: { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` },
              },
            );
          }
        });
      }
      await sleep(800);
    }
    for (let i = 0; i < 2000; i++) {
      const page = await store.list({ status: ['PENDING', 'RUNNING'], limit: 1 });
      if (page.items.length === 0) break;
      await sleep(25);
    }
  } finally {
    await runtime.stop({ closeStore: false });
  }
  const dead = (await store.list({ status: 'DEAD', limit: 100 })).items.map((c) => c.id);
  const running = await submit(store, 'order.sync-external', {
    bizKey: 'order-2001',
    payload: { orderId: 2001, version: 2 },
    owner: 'order-demo',
  });
  await claim(store, running);
  const due = [
    await submit(store, UNRUN_TYPE, { payload: { reportId: 7 }, runAt: new Date(Date.now() - 90_000) }),
    await submit(store, UNRUN_TYPE, { payload: { reportId: 8 } }),
  ];
  const delayed = [
    await submit(store, 'order.notify-user', {
      bizKey: 'order-2002',
      payload: { orderId: 2002, version: 1 },
      runAt: new Date(Date.now() + 3_600_000),
    }),
  ];
  const cancelled = await submit(store, 'order.notify-user', { payload: { orderId: 2003, version: 1 } });
  await store.cancel(cancelled, 'customer withdrew the order');
  return { dead, running, due, delayed };
}
