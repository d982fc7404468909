// @asynccmd/runtime/tracing: OpenTelemetry trace context carried from submit to execution
// (@opentelemetry/api only; without an SDK both are no-ops).
export { createTraceHeadersProvider, createTracingInterceptor } from './ops/tracing.js';
export type { ContextPropagator, TraceHeadersOptions, TracingInterceptorOptions } from './ops/tracing.js';
