import { describeRateLimitE2E } from './rate-limits-suite.js';
import { postgresRuntimeHarness } from './postgres-harness.js';

describeRateLimitE2E('postgres', postgresRuntimeHarness, {
  workers: 4,
  inserted: 40,
  submittedPerWorker: 4,
  free: 400,
  rate: { maxStarts: 20, periodMs: 2_000, burst: 4 },
});
