import { describeRateLimitE2E } from './rate-limits-suite.js';
import { sqliteRuntimeHarness } from './sqlite-harness.js';

describeRateLimitE2E('sqlite', sqliteRuntimeHarness, {
  workers: 4,
  inserted: 40,
  submittedPerWorker: 4,
  free: 400,
  rate: { maxStarts: 20, periodMs: 2_000, burst: 4 },
});
