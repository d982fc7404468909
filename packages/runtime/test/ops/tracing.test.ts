import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type TextMapPropagator,
} from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatTraceparent, parseTraceparent } from '../../src/ops/trace-context.js';
import {
  createTraceHeadersProvider,
  createTracingInterceptor,
  submitterSpanContext,
} from '../../src/ops/tracing.js';
import { AsyncLocalContextManager, RecordingTracer } from './in-memory-tracer.js';
import { claim, openTempSqlite, submit, type TempSqlite } from './support.js';

describe('tracing', () => {
  let db: TempSqlite;
  const tracer = new RecordingTracer();

  beforeAll(async () => {
    db = await openTempSqlite();
  });
  afterAll(async () => {
    await db.dispose();
    context.disable();
  });

  it('is a no-op without an SDK: no headers, and executions run and fail as before', async () => {
    // No context manager, tracer provider or propagator registered yet: the API's defaults.
    expect(createTraceHeadersProvider()()).toEqual({});
    const intercept = createTracingInterceptor();
    const id = await submit(db.store, 'trace.noop');
    const c = await claim(db.store, id);
    let ran = false;
    await intercept(c, async () => {
      ran = true;
    });
    expect(ran).toBe(true);
    const boom = new Error('boom');
    await expect(
      intercept(c, async () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
  });

  it('W3C traceparent round trip', () => {
    const sc = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1 };
    const header = formatTraceparent(sc);
    expect(header).toBe('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
    expect(parseTraceparent(header, 'vendor=abc')).toMatchObject({ ...sc, isRemote: true });
    expect(parseTraceparent(header, 'vendor=abc')?.traceState?.get('vendor')).toBe('abc');
    for (const bad of [
      undefined,
      '',
      'garbage',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra',
    ]) {
      expect(parseTraceparent(bad)).toBeNull();
    }
  });

  describe('with a tracer and a context manager', () => {
    beforeAll(() => {
      context.setGlobalContextManager(new AsyncLocalContextManager());
    });

    it('carries the submitter trace through the command row to a linked CONSUMER execution span', async () => {
      const headersOf = createTraceHeadersProvider();
      const submitter = tracer.startSpan('POST /orders', { kind: SpanKind.SERVER }, ROOT_CONTEXT);
      const headers = context.with(trace.setSpan(ROOT_CONTEXT, submitter), () => headersOf());
      expect(headers['traceparent']).toBe(formatTraceparent(submitter.spanContext()));

      const id = await submit(db.store, 'order.ship', { bizKey: 'order-42', headers });
      const command = await claim(db.store, id);
      expect(command.headers['traceparent']).toBe(headers['traceparent']);

      const intercept = createTracingInterceptor({ tracer });
      let activeInside: string | undefined;
      await intercept(command, async () => {
        activeInside = trace.getActiveSpan()?.spanContext().spanId;
      });
      const span = tracer.spans.at(-1);
      expect(span?.name).toBe('process order.ship');
      expect(span?.kind).toBe(SpanKind.CONSUMER);
      expect(span?.ended).toBe(true);
      expect(activeInside).toBe(span?.spanContext().spanId);
      expect(span?.status.code).toBe(SpanStatusCode.UNSET);
      expect(span?.links).toHaveLength(1);
      expect(span?.links[0]?.context).toMatchObject({
        traceId: submitter.spanContext().traceId,
        spanId: submitter.spanContext().spanId,
        isRemote: true,
      });
      // Its own trace: a link, not a parent, since it may run hours later.
      expect(span?.parent).toBeUndefined();
      expect(span?.attributes).toMatchObject({
        'messaging.system': 'asynccmd',
        'messaging.operation': 'process',
        'messaging.operation.type': 'process',
        'messaging.destination.name': 'order.ship',
        'messaging.message.id': id,
        'asynccmd.attempt': 1,
        'asynccmd.retry_count': 0,
        'asynccmd.max_retry': 3,
        'asynccmd.biz_key': 'order-42',
      });
    });

    it('records the exception and sets error status on failure, and rethrows', async () => {
      const intercept = createTracingInterceptor({ tracer });
      const command = await claim(db.store, await submit(db.store, 'order.fail'));
      const failure = new TypeError('inventory service refused');
      await expect(
        intercept(command, async () => {
          throw failure;
        }),
      ).rejects.toBe(failure);
      const span = tracer.spans.at(-1);
      expect(span?.name).toBe('process order.fail');
      expect(span?.exceptions).toEqual([failure]);
      expect(span?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'inventory service refused' });
      expect(span?.attributes['error.type']).toBe('TypeError');
      expect(span?.ended).toBe(true);
      expect(span?.links).toEqual([]);
    });

    it('picks up a tracer provider registered globally after the interceptor was made (as an SDK does)', async () => {
      const intercept = createTracingInterceptor();
      const global = new RecordingTracer();
      expect(trace.setGlobalTracerProvider({ getTracer: () => global })).toBe(true);
      try {
        await intercept(await claim(db.store, await submit(db.store, 'order.global')), async () => undefined);
        expect(global.spans.map((s) => s.name)).toEqual(['process order.global']);
      } finally {
        trace.disable();
      }
    });

    it('uses an installed propagator when there is one (e.g. one that also writes baggage)', () => {
      const propagator: TextMapPropagator = {
        inject: (ctx, carrier, setter) => {
          const sc = trace.getSpanContext(ctx);
          if (sc) setter.set(carrier, 'x-trace', `${sc.traceId}:${sc.spanId}`);
        },
        extract: (ctx, carrier, getter) => {
          const v = getter.get(carrier, 'x-trace');
          if (typeof v !== 'string') return ctx;
          const [traceId = '', spanId = ''] = v.split(':');
          return trace.setSpanContext(ctx, {
            traceId,
            spanId,
            traceFlags: TraceFlags.SAMPLED,
            isRemote: true,
          });
        },
        fields: () => ['x-trace'],
      };
      const submitter = tracer.startSpan('submit', {}, ROOT_CONTEXT);
      const headers = context.with(trace.setSpan(ROOT_CONTEXT, submitter), () =>
        createTraceHeadersProvider({ propagator })(),
      );
      expect(headers).toEqual({
        'x-trace': `${submitter.spanContext().traceId}:${submitter.spanContext().spanId}`,
        // The W3C header is added as well, so executions link even where a different propagator runs.
        traceparent: formatTraceparent(submitter.spanContext()),
      });
      expect(submitterSpanContext(headers, propagator)?.spanId).toBe(submitter.spanContext().spanId);
      // The global propagation API is still the no-op default here.
      expect(submitterSpanContext(headers, propagation)?.spanId).toBe(submitter.spanContext().spanId);
    });
  });
});
