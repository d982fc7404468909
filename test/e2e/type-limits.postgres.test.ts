import { describeTypeLimitE2E } from './type-limits-suite.js';
import { postgresRuntimeHarness } from './postgres-harness.js';

describeTypeLimitE2E('postgres', postgresRuntimeHarness, {
  inserted: 100,
  submittedPerWorker: 25,
  workers: 4,
  limit: 3,
});
