import { afterEach, describe, expect, it } from 'vitest';
import { type CommandId, type CommandRecord, type ExecutionMode, LIMITS } from '@asynccmd/core';
import { createAsyncCommands, defineExecutor, type ExecutionContext } from '../src/index.js';
import { openTempSqlite, type TempSqlite } from './ops/support.js';

async function until(condition: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(await condition()).toBe(true);
}

let db: TempSqlite;
const opened: { stop(): Promise<void> }[] = [];

afterEach(async () => {
  for (const runtime of opened.splice(0)) await runtime.stop();
  await db?.dispose();
});

type Execute = (payload: { n: number }, ctx: ExecutionContext<{ n: number }>) => unknown;

/** A started runtime on the test's file whose one executor, of `mode`, runs `execute`. */
function runtimeWith(
  execute: Execute,
  options: { mode?: ExecutionMode; maxResultBytes?: number; maxRetry?: number } = {},
) {
  const executor = defineExecutor<'t.job', { n: number }>({
    type: 't.job',
    mode: options.mode ?? 'SCHEDULED',
    maxRetry: options.maxRetry ?? 0,
    // An immediate retry, so a failed first attempt is retried within the test.
    backoff: { delayMs: () => 0 },
    execute: (payload, ctx) => void execute(payload, ctx),
  });
  const runtime = createAsyncCommands({
    store: db.store,
    executors: [executor],
    pollIntervalMs: 20,
    ...(options.maxResultBytes === undefined ? {} : { maxResultBytes: options.maxResultBytes }),
  });
  opened.push(runtime);
  runtime.start();
  return runtime;
}

async function submitted(runtime: ReturnType<typeof runtimeWith>, n: number): Promise<CommandId> {
  return runtime.client.transaction((_tx, submit) => submit('t.job', { n }));
}

/** The command once it has reached a terminal state. */
async function finished(id: CommandId): Promise<CommandRecord> {
  let record: CommandRecord | null = null;
  await until(async () => {
    record = await db.store.get(id);
    return record !== null && ['SUCCESS', 'DEAD'].includes(record.status);
  });
  return record!;
}

describe('executor results (ctx.setResult), on SQLite', () => {
  it.each(['SCHEDULED', 'ASYNC_POOL', 'IMMEDIATE'] as const)(
    'a %s executor’s result is stored with its success, the last call winning; one that leaves none has null',
    async (mode) => {
      db = await openTempSqlite();
      const runtime = runtimeWith(
        ({ n }, ctx) => {
          if (n === 0) return;
          ctx.setResult('first');
          ctx.setResult({ invoice: `INV-${n}`, lines: [1, 2], note: 'quotes " and \\ and ✓' });
        },
        { mode },
      );
      const [a, b] = [await submitted(runtime, 7), await submitted(runtime, 0)];
      expect((await finished(a)).result).toEqual({
        invoice: 'INV-7',
        lines: [1, 2],
        note: 'quotes " and \\ and ✓',
      });
      expect((await finished(b)).result).toBeNull();
    },
  );

  it('a failed attempt keeps no result: the retry that succeeds decides', async () => {
    db = await openTempSqlite();
    const runtime = runtimeWith(
      (_p, ctx) => {
        ctx.setResult(`attempt ${ctx.attempt}`);
        if (ctx.attempt === 1) throw new Error('downstream 503');
      },
      { maxRetry: 1 },
    );
    const record = await finished(await submitted(runtime, 1));
    expect(record.status).toBe('SUCCESS');
    expect(record.retryCount).toBe(1);
    expect(record.result).toBe('attempt 2');
  });

  it('a result JSON would not bring back fails the attempt with a typed error; caught, the attempt succeeds without one', async () => {
    db = await openTempSqlite();
    class Receipt {
      constructor(readonly id: string) {}
    }
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    const bad: unknown[] = [10n, new Receipt('r-1'), cyclic, () => 1, Number.NaN];
    const caught: string[] = [];
    const runtime = runtimeWith(({ n }, ctx) => {
      if (n < 100) return ctx.setResult(bad[n]);
      try {
        ctx.setResult(bad[n - 100]);
      } catch (e) {
        caught.push((e as { code: string }).code);
      }
    });
    for (let n = 0; n < bad.length; n++) {
      const record = await finished(await submitted(runtime, n));
      expect(record.status).toBe('DEAD');
      expect(record.lastError).toMatch(/result is not JSON-serialisable/);
      expect(record.result).toBeNull();
    }
    const record = await finished(await submitted(runtime, 101));
    expect(record.status).toBe('SUCCESS');
    expect(record.result).toBeNull();
    expect(caught).toEqual(['RESULT_NOT_SERIALISABLE']);
  });

  it('keeps a result up to maxResultBytes and refuses one a byte larger with RESULT_TOO_LARGE', async () => {
    db = await openTempSqlite();
    const limit = 1_000;
    // JSON of a string of k two-byte characters: k × 2 + 2 bytes.
    const runtime = runtimeWith(({ n }, ctx) => ctx.setResult('é'.repeat(n)), { maxResultBytes: limit });
    const fits = await finished(await submitted(runtime, (limit - 2) / 2));
    expect(fits.status).toBe('SUCCESS');
    expect(fits.result).toBe('é'.repeat((limit - 2) / 2));
    const over = await finished(await submitted(runtime, (limit - 2) / 2 + 1));
    expect(over.status).toBe('DEAD');
    expect(over.lastError).toMatch(/result is 1002 bytes as JSON, over the limit of 1000 bytes/);
    expect(over.result).toBeNull();
  });

  it('refuses a maxResultBytes outside 1..MAX_RESULT_BYTES when the runtime is built', async () => {
    db = await openTempSqlite();
    for (const maxResultBytes of [0, LIMITS.resultBytes + 1, 1.5, '64' as unknown as number]) {
      expect(() => createAsyncCommands({ store: db.store, executors: [], maxResultBytes })).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
    }
  });
});
