export type { BulkRetryResult } from './bulk-retry.js';
export type { DashboardOptions } from './dashboard.js';
export type { OutcomeBucket, OutcomeSeries } from './outcome-window.js';
export type { DashboardSummary, ScheduleSummary } from './summary.js';
