// @asynccmd/runtime/metrics: Prometheus series from the runtime's events and the store (prom-client).
export { createMetrics } from './ops/metrics.js';
export type { CommandMetrics, MetricsOptions } from './ops/metrics.js';
