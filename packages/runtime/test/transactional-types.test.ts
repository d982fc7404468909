import type { PoolClient } from 'pg';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { SqliteDatabase } from '@asynccmd/adapter-sqlite';
import {
  createAsyncCommands,
  defineExecutor,
  defineTransactionalExecutor,
  type AnyExecutor,
  type AsyncCommandsOptions,
  type TransactionalContext,
} from '../src/index.js';
import { stubStore } from './stub-store.js';

// Checked by `tsc -p tsconfig.tests.json`: the handle's type is the store's, the payload the executor's.
const project = defineTransactionalExecutor<PoolClient>()<'order.project', { orderId: string }>({
  type: 'order.project',
  transactional: true,
  async execute(payload, ctx) {
    expectTypeOf(payload).toEqualTypeOf<{ orderId: string }>();
    expectTypeOf(ctx.tx).toEqualTypeOf<PoolClient>();
    expectTypeOf(ctx).toMatchTypeOf<TransactionalContext<{ orderId: string }, PoolClient>>();
    await ctx.tx.query('SELECT 1');
    await ctx.submit('order.notify', { orderId: payload.orderId });
  },
});

const onSqlite = defineTransactionalExecutor<SqliteDatabase>()<'order.audit', { n: number }>({
  type: 'order.audit',
  transactional: true,
  execute(_payload, ctx) {
    ctx.tx.prepare('SELECT 1').get();
    // @ts-expect-error a better-sqlite3 handle has no query()
    void ctx.tx.query;
  },
});

// A workflow in the attempt's transaction: its steps typed by the executor's command type map.
const fanOut = defineTransactionalExecutor<PoolClient, { 'order.notify': { orderId: string } }>()<
  'order.fan-out',
  { orderId: string }
>({
  type: 'order.fan-out',
  transactional: true,
  async execute({ orderId }, ctx) {
    const submitted = await ctx
      .workflow(`fan-out-${orderId}`)
      .step('notify', 'order.notify', { orderId })
      .submit();
    expectTypeOf(submitted.steps).toEqualTypeOf<Readonly<Record<string, string>>>();
    // @ts-expect-error a step's payload is its command type's
    ctx.workflow('other').step('notify', 'order.notify', { orderId: 42 });
  },
});

const plain = defineExecutor<'order.notify', { orderId: string }>({
  type: 'order.notify',
  execute(_payload, ctx) {
    // @ts-expect-error a plain executor's context has no transaction
    void ctx.tx;
  },
});

describe('transactional executor types', () => {
  it('transactional and plain executors are both AnyExecutors, and the client knows their payloads', () => {
    const executors: readonly AnyExecutor[] = [project, onSqlite, plain];
    expect(executors).toHaveLength(3);
    expect(fanOut.transactional).toBe(true);
    const store = stubStore({
      transactionalCompletion: {
        complete: async () => true,
        succeededUnder: async () => false,
        isTransient: () => false,
      },
    });
    const runtime = createAsyncCommands({
      store,
      executors: [project, plain],
    } satisfies AsyncCommandsOptions & {
      executors: readonly AnyExecutor[];
    });
    type Submit = Parameters<typeof runtime.client.submit<'order.project'>>[2];
    expectTypeOf<Submit>().toEqualTypeOf<{ orderId: string }>();
    expect(runtime.registry.get('order.project')?.transactional).toBe(true);
    expect(runtime.registry.get('order.notify')?.transactional).toBe(false);
  });
});
