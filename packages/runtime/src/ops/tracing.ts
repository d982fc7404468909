import type {
  ClaimedCommand,
  CommandHeaders,
  ExecutionInterceptor,
  SubmitHeadersProvider,
} from '@asynccmd/core';
import {
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  isSpanContextValid,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Link,
  type SpanContext,
  type TextMapPropagator,
  type Tracer,
} from '@opentelemetry/api';
import { formatTraceparent, parseTraceparent } from './trace-context.js';

/** The part of a propagator used here; `propagation` from @opentelemetry/api fits. */
export type ContextPropagator = Pick<TextMapPropagator, 'inject' | 'extract'>;

export interface TraceHeadersOptions {
  /** Default: the global propagator (`propagation` of @opentelemetry/api), with a W3C fallback. */
  readonly propagator?: ContextPropagator;
}

/**
 * A SubmitHeadersProvider that stores the submitter's trace context with the command (traceparent,
 * tracestate, and whatever else the installed propagator writes, e.g. baggage). Without an
 * OpenTelemetry SDK there is no active span and it returns no headers.
 */
export function createTraceHeadersProvider(options: TraceHeadersOptions = {}): SubmitHeadersProvider {
  const propagator = options.propagator ?? propagation;
  return () => {
    const active = context.active();
    const carrier: Record<string, string> = {};
    propagator.inject(active, carrier, defaultTextMapSetter);
    const sc = trace.getSpanContext(active);
    if (carrier['traceparent'] === undefined && sc !== undefined && isSpanContextValid(sc)) {
      carrier['traceparent'] = formatTraceparent(sc);
      const state = sc.traceState?.serialize();
      if (state) carrier['tracestate'] = state;
    }
    return carrier;
  };
}

/** The submitter's span context carried in a command's headers, or null. */
export function submitterSpanContext(
  headers: CommandHeaders,
  propagator: ContextPropagator = propagation,
): SpanContext | null {
  const extracted = trace.getSpanContext(
    propagator.extract(ROOT_CONTEXT, { ...headers }, defaultTextMapGetter),
  );
  if (extracted !== undefined && isSpanContextValid(extracted)) return extracted;
  return parseTraceparent(headers['traceparent'], headers['tracestate']);
}

export interface TracingInterceptorOptions {
  /** Default: `trace.getTracer('asynccmd')` (a no-op until an SDK registers a provider). */
  readonly tracer?: Tracer;
  readonly propagator?: ContextPropagator;
}

/**
 * An ExecutionInterceptor that wraps each execution in a CONSUMER span named `process <type>`,
 * following the OpenTelemetry messaging conventions, linked to the submitting trace. A link rather
 * than a parent: the execution may run hours later, after retries, and belongs to its own trace.
 */
export function createTracingInterceptor(options: TracingInterceptorOptions = {}): ExecutionInterceptor {
  const tracer = options.tracer ?? trace.getTracer('asynccmd');
  const propagator = options.propagator ?? propagation;
  return (command, next) => {
    const submitter = submitterSpanContext(command.headers, propagator);
    const links: Link[] = submitter === null ? [] : [{ context: submitter }];
    return tracer.startActiveSpan(
      `process ${command.type}`,
      { kind: SpanKind.CONSUMER, links, attributes: executionAttributes(command) },
      async (span) => {
        try {
          await next();
        } catch (error) {
          span.recordException(error instanceof Error ? error : String(error));
          span.setAttribute('error.type', error instanceof Error ? error.name || 'Error' : '_OTHER');
          span.setStatus({
            code: SpanStatusCode.ERROR,
            message: error instanceof Error ? error.message : String(error),
          });
          throw error;
        } finally {
          span.end();
        }
      },
    );
  };
}

/** Messaging semantic-convention attributes of one execution, plus asynccmd's own. */
export function executionAttributes(command: ClaimedCommand): Attributes {
  return {
    'messaging.system': 'asynccmd',
    'messaging.operation': 'process',
    'messaging.operation.type': 'process',
    'messaging.operation.name': 'process',
    'messaging.destination.name': command.type,
    'messaging.message.id': command.id,
    'asynccmd.attempt': command.retryCount + 1,
    'asynccmd.retry_count': command.retryCount,
    'asynccmd.max_retry': command.maxRetry,
    'asynccmd.rescue_count': command.rescueCount,
    ...(command.bizKey !== null ? { 'asynccmd.biz_key': command.bizKey } : {}),
  };
}
