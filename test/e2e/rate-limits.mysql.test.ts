import { describeRateLimitE2E } from './rate-limits-suite.js';
import { mysqlRuntimeHarness } from './mysql-harness.js';

describeRateLimitE2E('mysql', mysqlRuntimeHarness, {
  workers: 4,
  inserted: 40,
  submittedPerWorker: 4,
  free: 400,
  rate: { maxStarts: 20, periodMs: 2_000, burst: 4 },
});
