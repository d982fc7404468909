import { context, ROOT_CONTEXT, SpanStatusCode, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAsyncCommands } from '../../src/create-async-commands.js';
import { defineExecutor } from '../../src/executor.js';
import { startAdminServer, type AdminServer } from '../../src/ops/admin-server.js';
import { createMetrics } from '../../src/ops/metrics.js';
import { publicStatusPath, publicStatusReference } from '../../src/ops/public-status.js';
import { formatTraceparent } from '../../src/ops/trace-context.js';
import { createTraceHeadersProvider, createTracingInterceptor } from '../../src/ops/tracing.js';
import { client, type Answer } from './http-client.js';
import { AsyncLocalContextManager, RecordingTracer } from './in-memory-tracer.js';
import { openTempSqlite, type TempSqlite } from './support.js';

const TOKEN = 'wiring-token-0123456789';
const STATUS_SECRET = 'wiring-status-secret-0123456789abcdef';

/**
 * The ops pieces plugged into the real runtime on SQLite: an API submits, answers 202 with the
 * status URI, and the client follows it to the terminal state while metrics, health and tracing
 * see the same commands.
 */
describe('ops wired into the runtime (SQLite)', () => {
  let db: TempSqlite;
  let server: AdminServer;
  const tracer = new RecordingTracer();
  const metrics = createMetrics();
  let commands: ReturnType<typeof start>;

  function start(store: TempSqlite['store']) {
    const executors = [
      defineExecutor({ type: 'order.ship', execute: async (_p: { orderId: number }) => undefined }),
      defineExecutor({
        type: 'order.invoice',
        maxRetry: 0,
        execute: async (_p: { orderId: number }) => {
          throw new Error('invoice service said no');
        },
      }),
    ] as const;
    const c = createAsyncCommands({
      store,
      executors,
      pollIntervalMs: 20,
      interceptors: [createTracingInterceptor({ tracer })],
      headersProvider: createTraceHeadersProvider(),
    });
    c.on(metrics.listener);
    c.start();
    return c;
  }

  beforeAll(async () => {
    context.setGlobalContextManager(new AsyncLocalContextManager());
    db = await openTempSqlite();
    commands = start(db.store);
    server = await startAdminServer({
      store: db.store,
      token: TOKEN,
      publicStatus: { secret: STATUS_SECRET },
      metrics,
      health: { cacheMs: 0 },
    });
  });
  afterAll(async () => {
    await commands?.stop({ closeStore: false });
    await server?.close();
    await db?.dispose();
    context.disable();
  });

  /** What an API client does after a 202: follow Location until the state is terminal. */
  async function follow(location: string): Promise<Answer> {
    const api = client(server.url);
    for (let i = 0; i < 500; i++) {
      const a = await api.get(location);
      if ((a.body as { terminal?: boolean }).terminal) return a;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`${location} never reached a terminal state`);
  }

  /** The API handler's part: submit in the business transaction, answer 202 with the status URI. */
  async function accept(type: 'order.ship' | 'order.invoice', orderId: number) {
    const submitter = tracer.startSpan('POST /orders', {}, ROOT_CONTEXT);
    const id = await context.with(trace.setSpan(ROOT_CONTEXT, submitter), () =>
      commands.client.transaction((_tx, submit) => submit(type, { orderId })),
    );
    submitter.end();
    return { id, location: publicStatusPath(id, { secret: STATUS_SECRET }), submitter };
  }

  it('a 202 client follows a command to completed; the execution span links to the request', async () => {
    const { id, location, submitter } = await accept('order.ship', 1);
    const reference = publicStatusReference(id, { secret: STATUS_SECRET });
    expect(location).toBe(`/status/${reference}`);
    const done = await follow(location);
    expect(done.body).toMatchObject({ reference, status: 'SUCCESS', operation: 'completed', terminal: true });

    const span = tracer.spans.find((s) => s.attributes['messaging.message.id'] === id);
    expect(span?.name).toBe('process order.ship');
    expect(span?.links[0]?.context.spanId).toBe(submitter.spanContext().spanId);
    expect((await db.store.get(id))?.headers['traceparent']).toBe(formatTraceparent(submitter.spanContext()));

    const text = await metrics.metrics();
    expect(text).toContain('asynccmd_commands_submitted_total{type="order.ship",duplicate="false"} 1');
    expect(text).toContain('asynccmd_commands_succeeded_total{type="order.ship"} 1');
    expect(text).toContain(
      'asynccmd_accept_to_terminal_seconds_count{type="order.ship",outcome="succeeded"} 1',
    );
    expect(text).toMatch(/^asynccmd_claim_round_duration_seconds_count [1-9]/m);
  });

  it('a failing command ends follow_up_failed, health goes DOWN, and a retry through the API runs it again', async () => {
    const api = client(server.url, TOKEN);
    const { id, location } = await accept('order.invoice', 2);
    const failed = await follow(location);
    expect(failed.body).toMatchObject({ status: 'DEAD', operation: 'follow_up_failed' });
    expect(failed.text).not.toContain('invoice service said no');
    expect((await api.get(`/commands/${id}`)).body).toMatchObject({ lastError: 'invoice service said no' });
    const span = tracer.spans.find((s) => s.attributes['messaging.message.id'] === id);
    expect(span?.status.code).toBe(SpanStatusCode.ERROR);
    expect(span?.exceptions).toHaveLength(1);

    const down = await api.get('/health');
    expect(down.status).toBe(503);
    expect(down.body).toMatchObject({ reasons: [{ code: 'DEAD_LETTERS' }], checks: { deadLetters: 1 } });
    expect(await metrics.metrics()).toContain('asynccmd_commands_dead_total{type="order.invoice"} 1');

    expect((await api.post(`/commands/${id}/retry`)).status).toBe(200);
    const again = await follow(location);
    expect(again.body).toMatchObject({ status: 'DEAD' });
    expect(await metrics.metrics()).toContain('asynccmd_commands_dead_total{type="order.invoice"} 2');

    expect((await api.post(`/commands/${id}/kill`, { reason: 'invoiced by hand' })).status).toBe(200);
    expect((await api.get('/health')).body).toMatchObject({ status: 'UP' });
  });
});
