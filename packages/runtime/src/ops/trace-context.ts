import { createTraceState, type SpanContext } from '@opentelemetry/api';

/**
 * W3C Trace Context (traceparent / tracestate), written and read directly. Used when no global
 * propagator is installed (an app may register a tracer without one), so a command's execution span
 * still links back to the trace that submitted it.
 */

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = /^0+$/;

export function formatTraceparent(sc: SpanContext): string {
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

export function parseTraceparent(traceparent: string | undefined, tracestate?: string): SpanContext | null {
  const m = TRACEPARENT.exec(traceparent?.trim() ?? '');
  if (m === null) return null;
  const [, version, traceId = '', spanId = '', flags = '00', rest] = m;
  // Version ff is forbidden; version 00 has nothing after the flags.
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (ZERO_TRACE.test(traceId) || ZERO_TRACE.test(spanId)) return null;
  return {
    traceId,
    spanId,
    traceFlags: parseInt(flags, 16),
    isRemote: true,
    ...(tracestate ? { traceState: createTraceState(tracestate) } : {}),
  };
}
